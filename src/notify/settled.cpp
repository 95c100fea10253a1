// settled.hpp
#include "settled.hpp"

#include <algorithm>

#include "berth/replication/cluster.hpp"

namespace berth::notify {

std::uint64_t wall_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::uint64_t settled_before(const replication::Cluster* cluster, std::chrono::milliseconds settle,
                             std::chrono::steady_clock::time_point started) {
    const auto now = wall_ms();
    if (!cluster) return now;
    // While catching up, everything is held however long that takes: a bootstrap fills the log in
    // parts (links, manifests, tags), not in the order the changes were made.
    constexpr auto hold = std::chrono::milliseconds(max_hold_ms);
    if (cluster->catching_up(hold)) return 0;
    // A peer not read to its head since this replica started holds everything, for a while: what it
    // has not told yet may be older than anything here.
    auto heard = cluster->heard_until_ms(hold);
    if (heard == 0 && std::chrono::steady_clock::now() - started < hold) return 0;
    heard = std::max(heard, now - max_hold_ms);
    const auto wait = static_cast<std::uint64_t>(settle.count());
    return heard > wait ? heard - wait : 0;
}

}  // namespace berth::notify
