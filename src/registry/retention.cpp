#include "berth/registry/retention.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <queue>
#include <thread>
#include <unordered_map>

#include "berth/oci/names.hpp"
#include "berth/observe/log.hpp"
#include "berth/registry/peers.hpp"
#include "berth/storage/meta_store.hpp"
#include "berth/storage/pull_times.hpp"
#include "untagged.hpp"

namespace berth::registry {

namespace {

// Tags are deleted this many to a commit: the write lock is held for one
// chunk, never for a whole repository.
constexpr std::size_t chunk = 512;
constexpr std::size_t repositories_page = 1000;
constexpr std::size_t pulls_page = 10000;

std::uint64_t ms_of(std::chrono::system_clock::time_point time) {
    using namespace std::chrono;
    return static_cast<std::uint64_t>(duration_cast<milliseconds>(time.time_since_epoch()).count());
}

std::uint64_t before(std::uint64_t now_ms, std::chrono::seconds age) {
    const auto age_ms = static_cast<std::uint64_t>(age.count()) * 1000;
    return now_ms > age_ms ? now_ms - age_ms : 0;
}

// As the configuration would say it: "30 days", "90 s".
std::string duration_text(std::chrono::seconds duration) {
    const auto s = duration.count();
    if (s && s % 86400 == 0) return std::to_string(s / 86400) + (s == 86400 ? " day" : " days");
    return std::to_string(s) + " s";
}

}  // namespace

const RetentionPolicy* RetentionOptions::policy_for(std::string_view repo) const {
    for (auto& policy : policies)
        if (oci::matches_any(policy.repositories, repo)) return &policy;
    return nullptr;
}

std::string tag_verdict(const RetentionPolicy& policy, const TagFacts& tag, std::uint64_t now_ms, bool pulls_known) {
    if (!policy.judges_tags() || tag.newest || oci::matches_any(policy.keep_tags, tag.tag)) return {};
    std::string reasons;
    auto add = [&](const std::string& reason) { reasons += (reasons.empty() ? "" : "; ") + reason; };
    if (policy.keep_last) add("not among the " + std::to_string(policy.keep_last) + " most recently pushed");
    if (!policy.expire_tags.empty()) {
        auto match = std::find_if(policy.expire_tags.begin(), policy.expire_tags.end(),
                                  [&](auto& glob) { return oci::glob_match(glob, tag.tag); });
        if (match == policy.expire_tags.end()) return {};
        add("matches expire_tags \"" + *match + "\"");
    }
    if (policy.expire_unpulled) {
        if (!pulls_known || tag.last_used_ms > before(now_ms, *policy.expire_unpulled)) return {};
        add("neither pushed nor pulled for " + duration_text(*policy.expire_unpulled));
    }
    return reasons;
}

struct Retention::Round {
    const std::string& replica_id;
    bool dry_run;
    std::uint64_t now_ms;
    const std::function<void(const RetentionDeletion&)>& deleted;
    RetentionReport report;

    void tell(const RetentionDeletion& deletion) {
        // The same audit line as a client's delete (http/handlers.cpp), with no principal: berth itself.
        if (!dry_run)
            observe::log("info", "audit",
                         {{"action", "retention delete " + deletion.kind},
                          {"principal", ""},
                          {"repository", deletion.repo},
                          {"reference", deletion.reference},
                          {"policy", deletion.policy},
                          {"reason", deletion.reason},
                          {"replica", replica_id}});
        if (deleted) deleted(deletion);
    }
};

Retention::Retention(RetentionOptions options, storage::MetaStore& meta, storage::HybridClock& clock,
                     std::string replica_id, const storage::PullTimes& pulls, RetentionPeers peers)
    : options_(std::move(options)), meta_(meta), clock_(clock), replica_id_(std::move(replica_id)), pulls_(pulls),
      peers_(peers) {}

RetentionReport Retention::run(bool dry_run, const std::function<void(const RetentionDeletion&)>& deleted,
                               std::chrono::system_clock::time_point now, const std::atomic<bool>* stop) {
    if (running_.exchange(true)) return {};
    struct Release {
        std::atomic<bool>& running;
        ~Release() { running = false; }
    } release{running_};
    const auto started = std::chrono::steady_clock::now();
    Round round{replica_id_, dry_run, ms_of(now), deleted, {}};
    auto stopped = [&] { return stop && *stop; };
    for (std::string after;;) {
        auto page = meta_.repositories(after, repositories_page);
        for (auto& repo : page) {
            if (stopped()) break;
            auto* policy = options_.policy_for(repo);
            if (!policy || (peers_.peers && !peers_.peers->evaluates(repo))) continue;
            try {
                judge(round, repo, *policy);
                ++round.report.repositories;
            } catch (const std::exception& error) {
                observe::log("error", "retention could not judge a repository",
                             {{"repository", repo}, {"error", error.what()}});
            }
            // Nothing is held between repositories: pushes and pulls waiting for this core go first.
            std::this_thread::yield();
        }
        if (page.size() < repositories_page || stopped()) break;
        after = page.back();
    }
    round.report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (!dry_run) {
        std::lock_guard lock(stats_mutex_);
        ++runs_;
        tags_deleted_ += round.report.tags_deleted;
        manifests_deleted_ += round.report.manifests_deleted;
        unpulled_skipped_ += round.report.unpulled_skipped;
        last_ = round.report;
    }
    return round.report;
}

std::optional<std::string> Retention::preview(const std::string& repo,
                                              const std::function<void(const RetentionDeletion&)>& deleted,
                                              std::chrono::system_clock::time_point now) {
    const auto* policy = options_.policy_for(repo);
    if (!policy) return std::nullopt;
    Round round{replica_id_, true, ms_of(now), deleted, {}};
    judge(round, repo, *policy);
    return policy->name;
}

void Retention::judge(Round& round, const std::string& repo, const RetentionPolicy& policy) {
    std::vector<std::uint64_t> tagged;
    // An immutable tag is never retained away (registry/policies.hpp): its repository's tags are
    // all kept, and so is what they name.
    const auto* guard = registry::policy_for(options_.immutable, repo);
    if (policy.judges_tags() && !(guard && guard->keeps_tags())) tagged = judge_tags(round, repo, policy);
    else
        meta_.visit_tags(
            repo, [&](const std::string&, const storage::TagRecord& r) { tagged.push_back(fingerprint(r.digest)); });
    if (!policy.untagged_after) return;
    const auto age = *policy.untagged_after;
    UntaggedSweep sweep{repo, std::move(tagged), before(round.now_ms, age), round.dry_run};
    round.report.manifests_deleted +=
        sweep_untagged(meta_, clock_, replica_id_, std::move(sweep), [&](const std::string& digest) {
            round.tell({"manifest", repo, digest, policy.name,
                        "untagged and unreferenced, last pushed more than " + duration_text(age) + " ago"});
        });
}

// Names (tags, digests) pulled since the policy's cutoff, here or on any other replica, by
// fingerprint (a collision can only keep a tag), with the last time each was pulled. known:
// false when a replica could not be asked, and unpulled tags are then kept.
std::unordered_map<std::uint64_t, std::uint64_t> Retention::last_pulls(Round& round, const std::string& repo,
                                                                       const RetentionPolicy& policy,
                                                                       bool& pulls_known) {
    std::unordered_map<std::uint64_t, std::uint64_t> pulled;
    const auto since = before(round.now_ms, *policy.expire_unpulled);
    auto note = [&](const std::pair<std::string, std::uint64_t>& pull) {
        auto& ms = pulled[fingerprint(pull.first)];
        ms = std::max(ms, pull.second);
    };
    if (peers_.unreachable) {
        pulls_known = false;
    } else if (peers_.peers) {
        auto elsewhere = peers_.peers->pulls_elsewhere(repo, since);
        pulls_known = elsewhere.has_value();
        if (elsewhere) std::for_each(elsewhere->begin(), elsewhere->end(), note);
    }
    if (pulls_known) {
        for (std::string after;;) {
            auto page = pulls_.since(repo, since, after, pulls_page);
            std::for_each(page.begin(), page.end(), note);
            if (page.size() < pulls_page) break;
            after = page.back().first;
        }
    } else {
        ++round.report.unpulled_skipped;
        observe::log("warn", "retention: not every replica could be asked for pull times; unpulled tags are kept",
                     {{"repository", repo}, {"policy", policy.name}});
    }
    return pulled;
}

namespace {

using NewestKey = std::pair<storage::Stamp, std::string>;

// The keep_last-th newest tag (by stamp, then name): a tag at or after it is among the newest, so
// one pushed between the passes is too. nullopt with all_newest when there are fewer.
std::optional<NewestKey> newest_threshold(const storage::MetaStore& meta, const std::string& repo,
                                          std::size_t keep_last, bool& all_newest) {
    std::priority_queue<NewestKey, std::vector<NewestKey>, std::greater<NewestKey>> newest;
    meta.visit_tags(repo, [&](const std::string& tag, const storage::TagRecord& r) {
        if (newest.size() < keep_last) {
            newest.emplace(r.stamp, tag);
        } else if (r.stamp >= newest.top().first && NewestKey(r.stamp, tag) > newest.top()) {
            newest.pop();
            newest.emplace(r.stamp, tag);
        }
    });
    all_newest = newest.size() < keep_last;
    return all_newest ? std::nullopt : std::optional(newest.top());
}

}  // namespace

struct Retention::DoomedTag {
    std::string tag;
    storage::TagRecord record;
    std::string reason;
};

void Retention::delete_tags(Round& round, const std::string& repo, const RetentionPolicy& policy,
                            std::vector<DoomedTag>& doomed, std::vector<std::uint64_t>& tagged) {
    std::vector<const DoomedTag*> went;
    if (round.dry_run) {
        for (auto& d : doomed) went.push_back(&d);
    } else if (!doomed.empty()) {
        auto lock = meta_.lock_writes();
        storage::MetaStore::Batch batch("retention");
        const storage::Stamp stamp{clock_.now(), replica_id_};
        for (auto& d : doomed) {
            auto current = meta_.tag(repo, d.tag);
            if (current && current->stamp == d.record.stamp) {
                batch.record_tag(repo, d.tag, "", stamp);
                went.push_back(&d);
            } else if (current && !current->deleted()) {
                tagged.push_back(fingerprint(current->digest));
            }
        }
        if (!went.empty()) {
            meta_.commit(batch, storage::MetaStore::Durability::deferred);
            lock.unlock();
            meta_.sync();
        }
    }
    for (auto* d : went) {
        ++round.report.tags_deleted;
        round.tell({"tag", repo, d->tag, policy.name, d->reason});
    }
    doomed.clear();
}

// Two passes over the repository's tags, neither holding more than keep_last
// of them: the first finds the keep_last-th newest, the second judges every
// tag and deletes a chunk at a time. Returns the fingerprints of the digests
// the kept tags point at, for the untagged rule.
std::vector<std::uint64_t> Retention::judge_tags(Round& round, const std::string& repo, const RetentionPolicy& policy) {
    bool all_newest = false;
    const auto threshold =
        policy.keep_last ? newest_threshold(meta_, repo, policy.keep_last, all_newest) : std::optional<NewestKey>();
    bool pulls_known = true;
    const auto pulled = policy.expire_unpulled ? last_pulls(round, repo, policy, pulls_known)
                                               : std::unordered_map<std::uint64_t, std::uint64_t>{};
    auto last_pull = [&](const std::string& name) -> std::uint64_t {
        auto it = pulled.find(fingerprint(name));
        return it == pulled.end() ? 0 : it->second;
    };
    std::vector<std::uint64_t> tagged;
    std::vector<DoomedTag> doomed;
    meta_.visit_tags(repo, [&](const std::string& tag, const storage::TagRecord& r) {
        ++round.report.tags_evaluated;
        TagFacts facts{tag};
        facts.newest =
            all_newest ||
            (threshold && (r.stamp > threshold->first || (r.stamp == threshold->first && tag >= threshold->second)));
        facts.last_used_ms = storage::HybridClock::physical_ms(r.stamp.clock);
        if (policy.expire_unpulled)
            facts.last_used_ms = std::max({facts.last_used_ms, last_pull(tag), last_pull(r.digest)});
        auto reason = tag_verdict(policy, facts, round.now_ms, pulls_known);
        if (reason.empty()) {
            tagged.push_back(fingerprint(r.digest));
            return;
        }
        doomed.push_back({tag, r, std::move(reason)});
        if (doomed.size() == chunk) delete_tags(round, repo, policy, doomed, tagged);
    });
    delete_tags(round, repo, policy, doomed, tagged);
    return tagged;
}

void Retention::write_metrics(observe::MetricsWriter& out) {
    using observe::Metric;
    std::lock_guard lock(stats_mutex_);
    out.add(Metric::retention_runs_total, static_cast<double>(runs_));
    out.add(Metric::retention_deleted_total, {{"kind", "tag"}}, static_cast<double>(tags_deleted_));
    out.add(Metric::retention_deleted_total, {{"kind", "manifest"}}, static_cast<double>(manifests_deleted_));
    out.add(Metric::retention_last_run_seconds, last_.seconds);
    out.add(Metric::retention_last_run_repositories, static_cast<double>(last_.repositories));
    out.add(Metric::retention_last_run_tags_evaluated, static_cast<double>(last_.tags_evaluated));
    out.add(Metric::retention_unpulled_skipped_total, static_cast<double>(unpulled_skipped_));
}

}  // namespace berth::registry
