#pragma once

namespace berth::registry {

// Thrown, before anything changed, by a call told it must not block (an I/O thread's) when it
// would: its caller moves to a thread that may.
struct WouldBlock {};

}  // namespace berth::registry
