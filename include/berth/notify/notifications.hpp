#pragma once
// Events about changes, told to the endpoints of the `notifications` section (docs/events.md).
// The change log is the queue: each endpoint reads it from a position of its own, and what it
// delivered is a Progress record every replica keeps and merges from its peers. One replica
// delivers for an endpoint at a time (the one the cluster's rendezvous hashing names); when it
// stops, the next one resumes from what it last heard. Each endpoint has a thread of its own, so a
// receiver that hangs holds nothing that serves clients.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "berth/notify/options.hpp"
#include "berth/observe/metrics.hpp"

namespace berth::storage {
class MetaStore;
class HybridClock;
}  // namespace berth::storage
namespace berth::replication {
class Cluster;
}

namespace berth::notify {

struct EndpointStatus {
    std::string name;
    bool delivering = false;  // this replica is the one delivering for it now
    bool disabled = false;    // by a 410, until re-enabled
    std::string disabled_reason;
    std::uint64_t lag_events = 0;  // changes in the log it has not heard of yet (at most a window)
    double lag_seconds = 0;        // age of the oldest of them
    std::string last_error;
    std::uint64_t delivered = 0, failed = 0, retried = 0, dead_lettered = 0;  // since this replica started
    std::uint64_t pulls_waiting = 0;  // pull counts taken from the tally, not sent yet
    std::uint64_t pulls_dropped = 0;  // pull counts not sent: refused, too old, or too many waiting
};

// POST /_berth/v1/notifications/{name}/replay?since=UNIX-SECONDS: the operation's parameter.
inline constexpr const char* replay_since = "since";

class Notifications {
public:
    // dir: where dead letters go (storage/layout.hpp); cluster: null without peers;
    // mirror_host: the upstream registry a repository mirrors, "" when it mirrors none; replica:
    // this replica's id, which its pull counts name.
    Notifications(Options options, storage::MetaStore& meta, storage::HybridClock& clock, std::filesystem::path dir,
                  replication::Cluster* cluster, std::function<std::string(const std::string&)> mirror_host,
                  std::string replica);
    ~Notifications();
    Notifications(const Notifications&) = delete;
    Notifications& operator=(const Notifications&) = delete;

    void start();
    void stop();
    // A client was served a manifest: counted for endpoints that ask for `pull` (a map update,
    // nothing more, and nothing at all when none asks).
    void pulled(const std::string& repo, const std::string& digest);
    const Options& options() const;

    std::vector<EndpointStatus> status() const;
    // An endpoint's dead letters, newest first, after skipping `skip`: each one CloudEvent (JSON).
    // nullopt: no such endpoint.
    std::optional<std::vector<std::string>> dead_letters(const std::string& name, std::size_t skip,
                                                         std::size_t limit) const;
    // Delivers again every change since since_ms (ms since the epoch) that the log still holds.
    bool replay(const std::string& name, std::uint64_t since_ms);
    // Ends a 410's disabling. false: no such endpoint.
    bool enable(const std::string& name);
    // What this replica knows of every endpoint's progress, for its peers (notify/progress.hpp).
    std::string progress_text() const;
    // The oldest log sequence an endpoint still needs: compaction keeps it.
    std::uint64_t needed_from() const;
    void write_metrics(observe::MetricsWriter& out) const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace berth::notify
