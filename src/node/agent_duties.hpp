#pragma once
// The node agent's work beside serving pulls: the runtime's mirror files checked (the init
// container writes them: node/runtime_files.hpp), and the images a cold cluster needs to start
// (agent.keep_images) kept whole in the node's cache, never evicted; and the images whose tags
// move under agent.preheat fetched before any pod asks for them.
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "berth/node/runtime_files.hpp"
#include "berth/observe/metrics.hpp"
#include "berth/proxy/options.hpp"
#include "berth/proxy/proxy.hpp"
#include "berth/registry/registry.hpp"

namespace berth::node {

class AgentDuties {
public:
    AgentDuties(const proxy::Options& options, registry::Registry& registry, proxy::Proxy& proxy);

    // Reads what the node has (changing nothing) and says in the log what keeps pulls from
    // reaching the agent; the metrics show the same.
    void check_runtime();
    // Fetches the part of every kept image that the cache lacks, as a pull would (for the node's
    // platform); what it holds afterwards is kept. Called often; works every keep_interval, and
    // at once the first time.
    void keep_images();
    // Reads the replicas' event feed from where the last call stopped (the first call only moves
    // to its end: a new agent does not fetch history) and fetches, one blob at a time and only
    // while no other fetch runs, each image a tag under agent.preheat moved to.
    void preheat();
    // The digests the cache must never evict: every manifest and blob of the kept images; nullopt
    // until keep_images has run once (the cache is not trimmed before: a restarted agent knows
    // nothing yet of what it must keep).
    std::optional<std::unordered_set<std::string>> kept() const;
    void write_metrics(observe::MetricsWriter& out) const;

private:
    // Adds the manifest's blobs and children to digests; false when something could not be had.
    // yield: a preheat's, which waits for live pulls before each blob.
    bool keep(const std::string& repo, const std::string& reference, std::unordered_set<std::string>& digests,
              int depth, bool yield);
    bool hold_blob(const std::string& repo, const std::string& digest, bool yield);

    // Waits (a while at most) until no fetch but preheat's own is under way.
    void yield_to_pulls() const;

    const proxy::Options& options_;
    registry::Registry& registry_;
    proxy::Proxy& proxy_;
    std::string feed_cursor_;
    bool feed_at_end_ = false;  // once the feed's history was skipped
    std::atomic<std::uint64_t> preheated_{0};
    const std::string architecture_;  // the node's, as OCI names it (amd64, arm64)
    mutable std::mutex mutex_;
    RuntimeReport runtime_;
    std::unordered_set<std::string> kept_;
    bool kept_known_ = false;
    std::chrono::steady_clock::time_point kept_at_{};
    std::size_t images_whole_ = 0;
    bool checked_ = false;
};

}  // namespace berth::node
