#pragma once
// The moment before which every change decided anywhere is in this replica's log, so that what is
// older can be told in stamp order: endpoints and the pollers' feed send only what is settled.
#include <chrono>
#include <cstdint>

namespace berth::replication {
class Cluster;
}

namespace berth::notify {

// A peer whose log has not been read to its head for this long, or that has not answered for this
// long, no longer holds events back: it is stalled or gone, and its changes are told when they
// arrive, out of order if need be.
inline constexpr std::uint64_t max_hold_ms = 30000;

std::uint64_t wall_ms();
// Ms since the epoch; 0 while this replica is catching up, or, started at `started`, has not yet
// read its peers' logs (for at most max_hold_ms).
// cluster: null without peers (a lone replica's log is in stamp order already).
std::uint64_t settled_before(const replication::Cluster* cluster, std::chrono::milliseconds settle,
                             std::chrono::steady_clock::time_point started);

}  // namespace berth::notify
