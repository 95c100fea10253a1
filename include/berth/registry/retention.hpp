#pragma once
// Retention policies: which tags and untagged manifests of a repository go.
// What they decide becomes ordinary tombstones with fresh stamps, so it
// replicates like a client's DELETE and a replica that was down cannot bring
// anything back. The rules in full: docs/retention.md.
#include "berth/registry/policies.hpp"
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "berth/storage/hybrid_clock.hpp"
#include "berth/observe/metrics.hpp"

namespace berth::storage {
class MetaStore;
class PullTimes;
}  // namespace berth::storage

namespace berth::registry {

class Peers;

// A tag matching keep_tags, or among the keep_last most recently pushed, is
// kept. Any other tag goes when every rule set holds for it: it is not among
// the keep_last newest, it matches expire_tags, it was neither pushed nor
// pulled for expire_unpulled. Untagged manifests go after untagged_after.
struct RetentionPolicy {
    std::string name;                                 // in logs and the audit trail
    std::vector<std::string> repositories;            // repository globs
    std::size_t keep_last = 0;                        // 0: no such rule
    std::vector<std::string> keep_tags, expire_tags;  // tag globs
    std::optional<std::chrono::seconds> expire_unpulled;
    std::optional<std::chrono::seconds> untagged_after;

    bool judges_tags() const { return keep_last || !expire_tags.empty() || expire_unpulled; }
};

struct RetentionOptions {
    std::chrono::seconds interval{3600};  // 0: only `berth gc`
    std::vector<RetentionPolicy> policies;
    // The registry's policies (registry/policies.hpp): tags they make immutable are kept.
    std::vector<Policy> immutable;
    // A repository's policy: the first whose globs match it; nullptr: none.
    const RetentionPolicy* policy_for(std::string_view repo) const;
};

// A tag as the rules see it.
struct TagFacts {
    std::string_view tag;
    bool newest = false;             // among the keep_last most recently pushed
    std::uint64_t last_used_ms = 0;  // its push, or a later pull of it or of its digest, on any replica
};
// Why the policy deletes the tag; empty when it is kept. Without pulls_known
// (a replica could not be asked) a tag is never found unpulled.
std::string tag_verdict(const RetentionPolicy& policy, const TagFacts& tag, std::uint64_t now_ms, bool pulls_known);

struct RetentionDeletion {
    std::string kind;  // "tag" or "manifest"
    std::string repo, reference, policy, reason;
};

struct RetentionReport {
    std::size_t repositories = 0, tags_evaluated = 0, tags_deleted = 0, manifests_deleted = 0;
    std::size_t unpulled_skipped = 0;  // repositories whose unpulled rule could not be judged
    double seconds = 0;
};

// The other replicas as retention sees them.
struct RetentionPeers {
    // Replicated: the replica owning a repository judges it, with every
    // replica's pull times. None: a single registry judges everything.
    Peers* peers = nullptr;
    // Replicated, with no way to ask the others (`berth gc`, offline): every
    // repository is judged here, and the unpulled rule nowhere.
    bool unreachable = false;
};

class Retention {
public:
    Retention(RetentionOptions options, storage::MetaStore& meta, storage::HybridClock& clock, std::string replica_id,
              const storage::PullTimes& pulls, RetentionPeers peers = {});

    bool enabled() const { return !options_.policies.empty(); }

    // One round over the repositories with a policy, a repository at a time;
    // returns at once while another round is still going. dry_run changes
    // nothing (and works on a read-only store); each deletion, or each one a
    // dry run would make, is told to `deleted`, and a real one logged as audit.
    RetentionReport run(bool dry_run, const std::function<void(const RetentionDeletion&)>& deleted = {},
                        std::chrono::system_clock::time_point now = std::chrono::system_clock::now(),
                        const std::atomic<bool>* stop = nullptr);
    // What the policies would delete from repo now, told to `deleted` like a dry run (the web UI's
    // retention page); the policy's name, or nullopt when none applies here.
    std::optional<std::string> preview(const std::string& repo,
                                       const std::function<void(const RetentionDeletion&)>& deleted,
                                       std::chrono::system_clock::time_point now = std::chrono::system_clock::now());
    void write_metrics(observe::MetricsWriter& out);

private:
    struct Round;
    void judge(Round& round, const std::string& repo, const RetentionPolicy& policy);
    std::vector<std::uint64_t> judge_tags(Round& round, const std::string& repo, const RetentionPolicy& policy);
    struct DoomedTag;
    // Deletes the tags still as judged (one pushed again meanwhile stays, and so does what it
    // points at, added to tagged) and tells the round.
    void delete_tags(Round& round, const std::string& repo, const RetentionPolicy& policy,
                     std::vector<DoomedTag>& doomed, std::vector<std::uint64_t>& tagged);
    std::unordered_map<std::uint64_t, std::uint64_t> last_pulls(Round& round, const std::string& repo,
                                                                const RetentionPolicy& policy, bool& pulls_known);

    RetentionOptions options_;
    storage::MetaStore& meta_;
    storage::HybridClock& clock_;
    std::string replica_id_;
    const storage::PullTimes& pulls_;
    const RetentionPeers peers_;
    std::atomic<bool> running_{false};

    std::mutex stats_mutex_;  // for /metrics
    std::uint64_t runs_ = 0, tags_deleted_ = 0, manifests_deleted_ = 0, unpulled_skipped_ = 0;
    RetentionReport last_;
};

}  // namespace berth::registry
