#include "berth/registry/maintenance.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <thread>

#include "berth/oci/manifest.hpp"
#include "berth/oci/media_types.hpp"
#include "berth/storage/blob_hash.hpp"
#include "berth/storage/blob_store.hpp"
#include "berth/storage/meta_store.hpp"
#include "untagged.hpp"

namespace berth::registry {

using storage::Event;

namespace {

using Clock = std::chrono::system_clock;

Clock::time_point physical(const storage::Stamp& stamp) {
    return Clock::time_point(std::chrono::milliseconds(storage::HybridClock::physical_ms(stamp.clock)));
}

}  // namespace

namespace {

// One collection. A repository at a time, so memory follows the largest repository, not the
// store: its untagged manifests (when configured), then its links. Only the fingerprints of
// linked blobs (8 bytes each) are kept across repositories, for the sweep of blob files; a
// collision can only keep a blob.
struct Collection {
    storage::BlobStore& blobs;
    storage::MetaStore& meta;
    storage::HybridClock& clock;
    const std::string& replica_id;
    const GcOptions& options;
    bool dry_run;
    Clock::time_point now;
    GcReport report;
    std::vector<std::uint64_t> linked;

    // Untagged manifests, when the configuration says so: the rule retention policies use too
    // (untagged.hpp). Returns what went (or, dry, would have gone), which then holds nothing.
    std::set<std::string> sweep_untagged_manifests(const std::string& repo) {
        std::set<std::string> gone;
        if (!options.delete_untagged) return gone;
        const auto now_ms = static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count());
        const auto age_ms = static_cast<std::uint64_t>(options.untagged_age.count()) * 1000;
        UntaggedSweep sweep{repo, {}, now_ms > age_ms ? now_ms - age_ms : 0, dry_run};
        meta.visit_tags(repo, [&](const std::string&, const storage::TagRecord& r) {
            sweep.tagged.push_back(fingerprint(r.digest));
        });
        report.manifests += sweep_untagged(meta, clock, replica_id, std::move(sweep), [&](const std::string& digest) {
            report.removed.push_back("manifest " + repo + "@" + digest);
            if (dry_run) gone.insert(digest);
        });
        return gone;
    }

    // What the repository's live manifests reference.
    std::set<std::uint64_t> referenced(const std::string& repo, const std::set<std::string>& gone) {
        std::set<std::uint64_t> out;
        meta.visit_manifests(repo, [&](const std::string& digest, const storage::ManifestRecord& record) {
            if (gone.count(digest)) return;
            try {
                auto parsed = oci::parse_manifest(record.bytes, record.media_type);
                if (parsed.config) out.insert(fingerprint(parsed.config->digest.str()));
                for (auto& layer : parsed.layers) out.insert(fingerprint(layer.digest.str()));
            } catch (const std::exception&) {
                // Stored manifests were valid when stored; one that no longer parses holds nothing.
            }
        });
        return out;
    }

    // Links no manifest uses, past the grace period; the others are remembered as linked.
    void sweep_links(const std::string& repo, const std::set<std::uint64_t>& used) {
        std::vector<std::pair<std::string, storage::Stamp>> unused;
        meta.visit_links(repo, [&](const std::string& digest, const storage::LinkRecord& r) {
            if (used.count(fingerprint(digest)) || physical(r.stamp) > now - options.grace)
                linked.push_back(fingerprint(digest));
            else unused.emplace_back(digest, r.stamp);
        });
        for (auto& [digest, stamp] : unused) {
            if (!dry_run) {
                auto lock = meta.lock_writes();
                auto current = meta.link(repo, digest);
                if (!current || current->deleted || current->stamp != stamp) {  // pushed again meanwhile
                    linked.push_back(fingerprint(digest));
                    continue;
                }
                storage::MetaStore::Batch batch;
                batch.record_link(repo, digest, {clock.now(), replica_id}, true, 0);
                meta.commit(batch);
            }
            report.removed.push_back("link " + repo + "@" + digest);
            ++report.links;
        }
    }

    // Blob files nobody links, old enough that no upload can be about to link them. Whatever links
    // a blob renews its file first (BlobStore::commit and touch), so a blob linked since the state
    // was read is young now.
    void sweep_blobs() {
        auto cutoff = now - options.grace;
        if (options.blobs_heard_until) cutoff = std::min(cutoff, *options.blobs_heard_until - options.grace);
        if (cutoff <= Clock::time_point{} + options.grace) return;  // nothing may go: not even listed
        std::sort(linked.begin(), linked.end());
        linked.erase(std::unique(linked.begin(), linked.end()), linked.end());
        std::vector<std::pair<oci::Digest, std::uint64_t>> orphans;
        blobs.for_each([&](const oci::Digest& digest, std::uint64_t size, std::int64_t mtime) {
            if (std::binary_search(linked.begin(), linked.end(), fingerprint(digest.str())) ||
                Clock::from_time_t(mtime) > cutoff) {
                ++report.blobs_kept;
                report.bytes_kept += size;
            } else {
                orphans.emplace_back(digest, size);
            }
        });
        for (auto& [digest, size] : orphans) {
            if (!dry_run && !blobs.remove_if_older(digest, cutoff)) {
                ++report.blobs_kept;
                report.bytes_kept += size;
                continue;
            }
            report.removed.push_back("blob " + digest.str() + " (" + std::to_string(size) + " bytes)");
            ++report.blobs;
            report.bytes_freed += size;
        }
    }
};

}  // namespace

GcReport collect_garbage(storage::BlobStore& blobs, storage::MetaStore& meta, storage::HybridClock& clock,
                         const std::string& replica_id, const GcOptions& options, bool dry_run, Clock::time_point now) {
    Collection collection{blobs, meta, clock, replica_id, options, dry_run, now, {}, {}};
    constexpr std::size_t repositories_per_read = 1000;
    for (std::string after;;) {
        const auto repositories = meta.repositories(after, repositories_per_read);
        for (auto& repo : repositories)
            collection.sweep_links(repo, collection.referenced(repo, collection.sweep_untagged_manifests(repo)));
        if (repositories.size() < repositories_per_read) break;
        after = repositories.back();
    }
    collection.sweep_blobs();
    return std::move(collection.report);
}

namespace {

// The manifests' bytes re-hashed, and which repository links each blob (a way to ask for it).
struct ScrubState : storage::MetaStore::StateVisitor {
    ScrubState(ScrubReport& r, const ScrubRepair& repair) : report(r), cached(repair.cached) {}
    ScrubReport& report;
    const std::function<bool(const std::string&)>& cached;
    std::map<std::string, std::string> linked;  // digest -> a repository linking it, not a cache
    void manifest(const std::string& repo, const std::string& digest, const storage::ManifestRecord& r) override {
        if (r.deleted) return;
        ++report.manifests_checked;
        auto parsed = oci::Digest::parse(digest);
        if (!parsed || oci::Digest::of(parsed->algorithm(), r.bytes) != *parsed)
            report.corrupt.push_back(repo + "@" + digest);
    }
    void tag(const std::string&, const std::string&, const storage::TagRecord&) override {}
    void link(const std::string& repo, const std::string& digest, const storage::LinkRecord& r) override {
        if (!r.deleted && !linked.count(digest) && !(cached && cached(repo))) linked.emplace(digest, repo);
    }
};

// A blob repaired only counts once the store holds it again.
void repair_lost(storage::BlobStore& blobs, const ScrubState& state, const oci::Digest& digest,
                 const ScrubRepair& repair, ScrubReport& report) {
    auto where = state.linked.find(digest.str());
    if (where == state.linked.end()) return;  // nothing links it, or only a cache: no loss
    bool back = false;
    try {
        back = blobs.mend(digest);
        if (!back && repair.from && repair.from(where->second, digest)) {
            // A mirror's fetch stores the blob just after its reader has had it all: a few seconds.
            for (int tries = 0; !(back = blobs.open_stored(digest).has_value()) && tries < 20; ++tries)
                std::this_thread::sleep_for(std::chrono::milliseconds(250));
        }
    } catch (const std::exception&) {}
    (back ? report.repaired : report.unrepaired).push_back(digest.str());
}

// The blob's bytes as stored, hashed at the rate; false when they do not match.
bool sound(const storage::BlobStore& blobs, const oci::Digest& digest, std::uint64_t bytes_per_second,
           std::chrono::steady_clock::time_point started, const std::atomic<bool>& stop, ScrubReport& report) {
    std::optional<storage::Hashed> hashed;
    try {
        auto blob = blobs.open_stored(digest);
        if (!blob) return true;  // collected meanwhile
        hashed = storage::hash(*blob, digest.algorithm(), [&](const char*, std::size_t n) {
            report.bytes_checked += n;
            if (bytes_per_second) {
                // Stay under the rate: sleep until the bytes so far are due.
                auto due = started + std::chrono::microseconds(report.bytes_checked * 1'000'000 / bytes_per_second);
                std::this_thread::sleep_until(due);
            }
            return !stop;
        });
    } catch (const storage::DigestMismatch&) {
        ++report.blobs_checked;  // a store that verifies what it reads (a bucket's object) found it damaged
        return false;
    } catch (const std::exception&) {
        return true;  // unreadable now (the store is away): the next scrub tries again
    }
    if (!hashed) return true;  // stopped
    ++report.blobs_checked;
    return hashed->digest == digest;
}

}  // namespace

ScrubReport scrub(storage::BlobStore& blobs, storage::MetaStore& meta, std::uint64_t bytes_per_second,
                  const std::atomic<bool>& stop, const ScrubRepair& repair) {
    ScrubReport report;
    std::vector<std::pair<oci::Digest, std::uint64_t>> all;
    std::set<std::string> stored;
    blobs.for_each([&](const oci::Digest& digest, std::uint64_t size, std::int64_t) {
        all.emplace_back(digest, size);
        stored.insert(digest.str());
    });
    // The links first: a corrupt blob is repaired as soon as it is found, not a whole pass later.
    ScrubState state(report, repair);
    meta.visit_state(state);
    const auto started = std::chrono::steady_clock::now();
    for (auto& [digest, size] : all) {
        if (stop) return report;
        if (sound(blobs, digest, bytes_per_second, started, stop, report)) continue;
        report.corrupt.push_back(digest.str());
        try {
            if (blobs.quarantine(digest)) {
                report.repaired.push_back(digest.str());
                continue;
            }
        } catch (const std::exception&) {
            continue;  // still in place: the next scrub tries again
        }
        repair_lost(blobs, state, digest, repair, report);
    }
    for (auto& [text, repo] : state.linked) {
        if (stop) break;
        if (stored.count(text)) continue;
        auto digest = oci::Digest::parse(text);
        try {
            // Listed before the link was read: a blob stored since is no loss.
            if (!digest || blobs.open_stored(*digest)) continue;
        } catch (const std::exception&) {
            continue;  // the store is away: not proof of loss
        }
        report.missing.push_back(text);
        repair_lost(blobs, state, *digest, repair, report);
    }
    return report;
}

void MaintenanceStats::write_metrics(observe::MetricsWriter& out) {
    using observe::Metric;
    std::lock_guard lock(mutex);
    out.add(Metric::storage_blob_bytes, static_cast<double>(last_gc.bytes_kept));
    out.add(Metric::storage_blobs, static_cast<double>(last_gc.blobs_kept));
    out.add(Metric::gc_runs_total, static_cast<double>(gc_runs));
    out.add(Metric::gc_last_removed_blobs, static_cast<double>(last_gc.blobs));
    out.add(Metric::gc_last_freed_bytes, static_cast<double>(last_gc.bytes_freed));
    out.add(Metric::scrub_runs_total, static_cast<double>(scrub_runs));
    out.add(Metric::scrub_last_checked_bytes, static_cast<double>(last_scrub.bytes_checked));
    out.add(Metric::scrub_corrupt_total, static_cast<double>(corrupt_total));
    out.add(Metric::scrub_missing_total, static_cast<double>(missing_total));
    out.add(Metric::scrub_repaired_total, static_cast<double>(repaired_total));
    out.add(Metric::scrub_unrepaired_blobs, static_cast<double>(last_scrub.unrepaired.size()));
}

}  // namespace berth::registry
