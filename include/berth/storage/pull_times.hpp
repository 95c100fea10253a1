#pragma once
// When this replica last served each tag and manifest digest of a repository
// to a client, for retention's rule on what nobody pulls. A pull costs a map
// update in memory; flush() writes what gathered since the last one in one
// batch, and only what moved: times are rounded up to the hour, so a tag
// pulled all day long is written about once an hour, not once a pull.
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace berth::storage {

class MetaStore;

class PullTimes {
public:
    static constexpr std::uint64_t resolution_ms = 3600 * 1000;
    // Past this many names noted, the pull that adds one more flushes them itself.
    static constexpr std::size_t max_noted = 100000;

    explicit PullTimes(MetaStore& meta);

    // Rounded up to the hour: a pull never looks older than it was. The repository's own entry
    // (name whole_repository) moves with every name's.
    void pulled(const std::string& repo, const std::string& name, std::uint64_t now_ms);
    static inline const std::string whole_repository;  // "": no tag or digest is empty
    // When repo's name (or whole_repository) was last pulled from this replica, noted or written.
    std::optional<std::uint64_t> last(const std::string& repo, const std::string& name) const;
    void flush();
    // Names of repo pulled at or after since_ms, with when, in byte order after
    // `after`, at most limit: those written and those only noted so far.
    std::vector<std::pair<std::string, std::uint64_t>> since(const std::string& repo, std::uint64_t since_ms,
                                                             const std::string& after, std::size_t limit) const;

private:
    MetaStore& meta_;
    std::mutex flush_mutex_;  // one flush at a time
    mutable std::mutex mutex_;
    // "<repo>\0<name>" -> rounded time. `flushing_` is what a flush is writing:
    // still read by since() until it is on disk.
    std::map<std::string, std::uint64_t> noted_, flushing_;
};

}  // namespace berth::storage
