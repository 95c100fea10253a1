#pragma once
// One endpoint's delivery: its thread reads the change log from its own position, and on the
// replica that delivers for it sends what has settled, in stamp order, moving its Progress on.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "berth/notify/notifications.hpp"
#include "dead_letters.hpp"
#include "notice.hpp"
#include "progress.hpp"
#include "rebuild.hpp"
#include "webhook.hpp"

namespace berth::notify {

// What every endpoint's worker shares, owned by Notifications.
struct Shared {
    storage::MetaStore& meta;
    storage::HybridClock& clock;
    replication::Cluster* cluster;  // null without peers
    std::function<std::string(const std::string&)> mirror_host;
    std::chrono::milliseconds settle;
    std::vector<std::string> base_images;  // Options::base_images
    RebuildLists rebuilds{meta};
    std::atomic<bool> stopping{false};
    std::atomic<bool> heard_peers{false};  // after the first round of asking peers for their progress
};

class EndpointWorker {
public:
    EndpointWorker(const Endpoint& endpoint, Shared& shared, const std::filesystem::path& dir);
    void start();
    void join();
    void wake();

    const Endpoint& endpoint() const { return endpoint_; }
    Progress progress() const;
    // A peer's word: kept when it is news.
    void merge(const Progress& other);
    void replay(std::uint64_t since_ms);
    // One interval's pull counts (those this endpoint hears of), sent beside the changes; at most
    // max_pending_pulls wait, what does not fit is dead-lettered.
    void add_pulls(const std::vector<Notice>& pulls);
    void enable();
    EndpointStatus status() const;
    std::uint64_t scan() const;
    const DeadLetters& dead_letters() const { return dead_; }

private:
    struct Pending {
        std::string sequence;  // sequence_of(event)
        storage::Event event;
    };
    void run();
    // One pass over the log; returns how long to wait before the next.
    std::chrono::milliseconds step();
    std::vector<Pending> uncovered(const Progress& progress, std::uint64_t& scan_to);
    void note_lag(const std::vector<Pending>& pending);
    // Sends one stamp's notices; false when they could not all go.
    bool deliver_group(std::vector<Notice>& group, Describer& describer, std::chrono::milliseconds& wait);
    bool in_scope(const std::string& repo) const;
    bool matches(const Notice& notice) const;
    void disable(const std::string& why);
    void dead_letter(const std::vector<Notice>& batch, const Outcome& outcome, const char* why);
    void save_locked();
    bool pass(const storage::Stamp& stamp, std::uint64_t generation);  // false: a replay began meanwhile
    // Sends waiting pull counts; returns how long until it should be called again.
    std::chrono::milliseconds deliver_pulls();
    void drop_pulls(std::size_t count, const char* why);
    std::chrono::steady_clock::time_point changes_after() const;
    std::uint64_t kicks() const;
    static std::chrono::milliseconds until(std::chrono::steady_clock::time_point when);

    const Endpoint endpoint_;
    Shared& shared_;
    std::unique_ptr<Sink> sink_;
    DeadLetters dead_;
    std::thread thread_;
    std::chrono::steady_clock::time_point started_;

    mutable std::mutex mutex_;
    std::condition_variable wake_;
    bool woken_ = false;
    Progress progress_;
    std::uint64_t scan_ = 0;
    std::set<std::string> sent_in_group_;  // ids of the stamp being sent that reached the receiver
    unsigned attempts_ = 0;                // failures in a row
    bool delivering_ = false;
    std::uint64_t lag_events_ = 0, oldest_lag_ms_ = 0;
    std::string last_error_;
    std::uint64_t delivered_ = 0, failed_ = 0, retried_ = 0, dead_lettered_ = 0;
    std::deque<Notice> pulls_;  // pull counts not delivered yet, oldest first
    unsigned pull_attempts_ = 0;
    std::chrono::steady_clock::time_point pulls_after_{};    // backing off until then
    std::chrono::steady_clock::time_point changes_after_{};  // the next pass over the log, not before
    std::uint64_t kicks_ = 0;                                // replays and enables
    std::uint64_t pulls_dropped_ = 0, pulls_dropped_unlogged_ = 0;
    std::chrono::steady_clock::time_point pulls_drop_logged_{};
};

}  // namespace berth::notify
