#pragma once
// Pulls counted per repository and digest between flushes, for endpoints that ask for `pull`
// events. Counting is one map update under a mutex: a pull never waits on a receiver, and the
// tally is bounded (what does not fit is counted as dropped).
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "notice.hpp"

namespace berth::notify {

class PullTally {
public:
    // True when this pull filled the tally: take() it early, or what follows goes uncounted.
    bool add(const std::string& repo, const std::string& digest, std::uint64_t now_ms);
    // What was counted since the last take, as this replica's pull notices; the tally starts over.
    std::vector<Notice> take(const std::string& replica, std::uint64_t now_ms,
                             const std::function<std::string(const std::string&)>& mirror_host);
    std::uint64_t dropped() const;

private:
    struct Count {
        std::uint64_t pulls = 0, first_ms = 0, last_ms = 0;
    };
    mutable std::mutex mutex_;
    std::map<std::pair<std::string, std::string>, Count> counts_;
    std::uint64_t dropped_ = 0;
    std::uint64_t last_take_ms_ = 0;
};

}  // namespace berth::notify
