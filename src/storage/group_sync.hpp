#pragma once
// Group commit of a write-ahead log. Writers that finish together each ask for
// the log to be made durable; the first to ask starts an fsync that covers every
// write readers could see when it began, those that ask meanwhile wait for the
// next one, and a writer whose write an earlier fsync covered returns at once.
//
// latest(): the position of the newest write readers can see (RocksDB's last
// sequence), which is in the log by then. Positions, not a count of writes kept
// beside them: a caller that found a write by reading it must be covered too.
//
// A failed fsync is final: the kernel may have dropped the pages it could not
// write, and a second fsync would report success for them. Every later sync()
// fails; a restart replays what the log really holds.
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

namespace berth::storage {

class GroupSync {
public:
    // sync_log() returns "" or why it failed.
    GroupSync(std::function<std::uint64_t()> latest, std::function<std::string()> sync_log);

    // Returns once every write visible before the call is durable; throws
    // std::runtime_error if that cannot be known.
    void sync();
    std::uint64_t syncs() const;  // fsyncs made

private:
    std::function<std::uint64_t()> latest_;
    std::function<std::string()> sync_log_;
    mutable std::mutex mutex_;
    std::condition_variable done_;
    std::uint64_t synced_;  // every write up to here is durable
    bool syncing_ = false;
    std::string failed_;
    std::uint64_t syncs_ = 0;
};

}  // namespace berth::storage
