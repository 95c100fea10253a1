#pragma once
// Work nobody waits on (events for receivers elsewhere) runs on threads at a lower CPU priority
// than those that serve clients: on a busy machine it takes what they leave, and still gets a
// share (it is niced, not idle) so that it keeps up.
namespace berth::net {

inline constexpr int background_nice = 5;

// Lowers the calling thread's priority by background_nice (Linux: a thread's own nice value).
void run_in_background();

}  // namespace berth::net
