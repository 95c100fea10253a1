// pull_tally.hpp
#include "pull_tally.hpp"

#include <algorithm>

namespace berth::notify {
namespace {

constexpr std::size_t max_counted = 10000;  // repository and digest pairs per interval

}  // namespace

bool PullTally::add(const std::string& repo, const std::string& digest, std::uint64_t now_ms) {
    std::lock_guard lock(mutex_);
    auto it = counts_.find({repo, digest});
    if (it == counts_.end()) {
        if (counts_.size() >= max_counted) {
            ++dropped_;
            return false;
        }
        it = counts_.emplace(std::make_pair(repo, digest), Count{0, now_ms, now_ms}).first;
    }
    ++it->second.pulls;
    it->second.last_ms = now_ms;
    return counts_.size() == max_counted && it->second.pulls == 1;
}

std::vector<Notice> PullTally::take(const std::string& replica, std::uint64_t now_ms,
                                    const std::function<std::string(const std::string&)>& mirror_host) {
    std::map<std::pair<std::string, std::string>, Count> counts;
    {
        std::lock_guard lock(mutex_);
        counts.swap(counts_);
        // Two takes in one millisecond (a full tally) still give their events ids of their own.
        now_ms = last_take_ms_ = std::max(now_ms, last_take_ms_ + 1);
    }
    std::vector<Notice> out;
    for (auto& [key, count] : counts) {
        Notice n;
        n.action = Action::pull;
        n.repository = key.first;
        n.upstream = mirror_host(n.repository);
        n.digest = key.second;
        n.replica = replica;
        n.pulls = count.pulls;
        n.first_pull_ms = count.first_ms;
        n.time_ms = count.last_ms;
        // Not a change: stamped with the moment of the count, so it sorts among the changes.
        n.stamp = {now_ms << 16, replica};
        n.sequence = sequence_text(n.stamp, 6, n.digest);
        n.id = id_of("pull\n" + replica + '\n' + n.repository + '\n' + n.digest + '\n' + std::to_string(now_ms));
        out.push_back(std::move(n));
    }
    return out;
}

std::uint64_t PullTally::dropped() const {
    std::lock_guard lock(mutex_);
    return dropped_;
}

}  // namespace berth::notify
