#include "berth/registry/maintenance.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <map>
#include <set>
#include <thread>

#include "berth/oci/manifest.hpp"
#include "berth/oci/media_types.hpp"
#include "berth/storage/blob_store.hpp"
#include "berth/storage/meta_store.hpp"

namespace berth::registry {

using storage::Event;

namespace {

using Clock = std::chrono::system_clock;

Clock::time_point physical(const storage::Stamp& stamp) {
    return Clock::time_point(std::chrono::milliseconds(storage::HybridClock::physical_ms(stamp.clock)));
}

struct State : storage::MetaStore::StateVisitor {
    std::map<std::string, std::map<std::string, storage::ManifestRecord>> manifests;  // live, by repo
    std::map<std::string, std::set<std::string>> tagged;                              // repo -> digests
    std::map<std::pair<std::string, std::string>, storage::Stamp> links;              // live (repo, digest)

    void manifest(const std::string& repo, const std::string& digest, const storage::ManifestRecord& r) override {
        if (!r.deleted) manifests[repo][digest] = r;
    }
    void tag(const std::string& repo, const std::string&, const storage::TagRecord& r) override {
        if (!r.deleted()) tagged[repo].insert(r.digest);
    }
    void link(const std::string& repo, const std::string& digest, const storage::LinkRecord& r) override {
        if (!r.deleted) links[{repo, digest}] = r.stamp;
    }
};

}  // namespace

GcReport collect_garbage(storage::BlobStore& blobs, storage::MetaStore& meta, storage::HybridClock& clock,
                         const std::string& replica_id, const GcOptions& options, bool dry_run,
                         Clock::time_point now) {
    GcReport report;
    State state;
    meta.visit_state(state);

    // What each repository's live manifests reference.
    std::map<std::string, std::set<std::string>> referenced_blobs, referenced_manifests;
    for (auto& [repo, manifests] : state.manifests)
        for (auto& [digest, record] : manifests) {
            try {
                auto parsed = oci::parse_manifest(record.bytes, record.media_type);
                if (parsed.config) referenced_blobs[repo].insert(parsed.config->digest.str());
                for (auto& layer : parsed.layers) referenced_blobs[repo].insert(layer.digest.str());
                for (auto& child : parsed.manifests) referenced_manifests[repo].insert(child.digest.str());
            } catch (const std::exception&) {
                // Stored manifests were valid when stored; one that no longer parses holds nothing.
            }
        }

    // Untagged manifests, when the policy says so: not tagged, not inside a
    // kept index, not a referrer of something still here, and old enough.
    if (options.delete_untagged) {
        for (auto& [repo, manifests] : state.manifests)
            for (auto it = manifests.begin(); it != manifests.end();) {
                auto& [digest, record] = *it;
                const bool keep = state.tagged[repo].count(digest) || referenced_manifests[repo].count(digest) ||
                                  (!record.subject.empty() && manifests.count(record.subject)) ||
                                  physical(record.stamp) > now - options.untagged_age;
                if (keep) {
                    ++it;
                    continue;
                }
                report.removed.push_back("manifest " + repo + "@" + digest);
                ++report.manifests;
                if (!dry_run) {
                    auto lock = meta.lock_writes();
                    auto current = meta.manifest(repo, digest);
                    if (current && !current->deleted && current->stamp == record.stamp) {
                        storage::Stamp stamp{clock.now(), replica_id};
                        storage::MetaStore::Batch batch;
                        batch.tombstone_manifest(repo, digest, &*current, stamp);
                        meta.commit(batch);
                    }
                }
                it = manifests.erase(it);
            }
        // What the deleted manifests referenced is recounted from what is left.
        referenced_blobs.clear();
        for (auto& [repo, manifests] : state.manifests)
            for (auto& [digest, record] : manifests) try {
                    auto parsed = oci::parse_manifest(record.bytes, record.media_type);
                    if (parsed.config) referenced_blobs[repo].insert(parsed.config->digest.str());
                    for (auto& layer : parsed.layers) referenced_blobs[repo].insert(layer.digest.str());
                } catch (const std::exception&) {
                }
    }

    // Links no manifest uses, past the grace period.
    std::set<std::string> linked;
    for (auto& [key, stamp] : state.links) {
        auto& [repo, digest] = key;
        if (referenced_blobs[repo].count(digest) || physical(stamp) > now - options.grace) {
            linked.insert(digest);
            continue;
        }
        if (!dry_run) {
            auto lock = meta.lock_writes();
            auto current = meta.link(repo, digest);
            if (!current || current->deleted || current->stamp != stamp) {  // pushed again meanwhile
                linked.insert(digest);
                continue;
            }
            storage::Stamp fresh{clock.now(), replica_id};
            storage::MetaStore::Batch batch;
            batch.record_link(repo, digest, fresh, true, 0);
            meta.commit(batch);
        }
        report.removed.push_back("link " + repo + "@" + digest);
        ++report.links;
    }

    // Blob files nobody links, old enough that no upload can be about to link them.
    std::vector<std::pair<oci::Digest, std::uint64_t>> orphans;
    blobs.for_each([&](const oci::Digest& digest, std::uint64_t size, std::int64_t mtime) {
        if (linked.count(digest.str()) || Clock::from_time_t(mtime) > now - options.grace) {
            ++report.blobs_kept;
            report.bytes_kept += size;
        } else {
            orphans.emplace_back(digest, size);
        }
    });
    for (auto& [digest, size] : orphans) {
        // Whatever links a blob renews its file first (BlobStore::commit and
        // touch), so a blob linked since the state was read is young now.
        if (!dry_run) {
            if (!blobs.remove_if_older(digest, now - options.grace)) {
                ++report.blobs_kept;
                report.bytes_kept += size;
                continue;
            }
        }
        report.removed.push_back("blob " + digest.str() + " (" + std::to_string(size) + " bytes)");
        ++report.blobs;
        report.bytes_freed += size;
    }
    return report;
}

ScrubReport scrub(storage::BlobStore& blobs, storage::MetaStore& meta, std::uint64_t bytes_per_second,
                  const std::atomic<bool>& stop) {
    ScrubReport report;
    std::vector<std::pair<oci::Digest, std::uint64_t>> all;
    blobs.for_each([&](const oci::Digest& digest, std::uint64_t size, std::int64_t) { all.emplace_back(digest, size); });
    std::vector<char> buffer(1 << 20);
    const auto started = std::chrono::steady_clock::now();
    for (auto& [digest, size] : all) {
        if (stop) break;
        int fd = ::open(blobs.path(digest).c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;  // collected meanwhile
        oci::Hasher hasher(digest.algorithm());
        for (ssize_t n; (n = ::read(fd, buffer.data(), buffer.size())) > 0;) {
            hasher.update(buffer.data(), static_cast<std::size_t>(n));
            report.bytes_checked += static_cast<std::uint64_t>(n);
            if (bytes_per_second) {
                // Stay under the rate: sleep until the bytes so far are due.
                auto due = started + std::chrono::microseconds(report.bytes_checked * 1'000'000 / bytes_per_second);
                std::this_thread::sleep_until(due);
            }
            if (stop) break;
        }
        ::close(fd);
        ++report.blobs_checked;
        if (!stop && hasher.peek() != digest) {
            report.corrupt.push_back(digest.str());
            try {
                blobs.quarantine(digest);
            } catch (const std::exception&) {
            }
        }
    }
    struct Manifests : storage::MetaStore::StateVisitor {
        ScrubReport* report;
        void manifest(const std::string& repo, const std::string& digest, const storage::ManifestRecord& r) override {
            if (r.deleted) return;
            ++report->manifests_checked;
            auto parsed = oci::Digest::parse(digest);
            if (!parsed || oci::Digest::of(parsed->algorithm(), r.bytes) != *parsed)
                report->corrupt.push_back(repo + "@" + digest);
        }
        void tag(const std::string&, const std::string&, const storage::TagRecord&) override {}
        void link(const std::string&, const std::string&, const storage::LinkRecord&) override {}
    } manifests;
    manifests.report = &report;
    if (!stop) meta.visit_state(manifests);
    return report;
}

std::string MaintenanceStats::metrics_text() {
    std::lock_guard lock(mutex);
    auto line = [](const char* name, const char* type, const char* help, std::uint64_t value) {
        return std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " +
               std::to_string(value) + "\n";
    };
    return line("berth_storage_blob_bytes", "gauge", "Bytes of blob files kept at the last garbage collection.",
                last_gc.bytes_kept) +
           line("berth_storage_blobs", "gauge", "Blob files kept at the last garbage collection.", last_gc.blobs_kept) +
           line("berth_gc_runs_total", "counter", "Garbage collections run.", gc_runs) +
           line("berth_gc_last_removed_blobs", "gauge", "Blob files the last collection removed.", last_gc.blobs) +
           line("berth_gc_last_freed_bytes", "gauge", "Bytes the last collection freed.", last_gc.bytes_freed) +
           line("berth_scrub_runs_total", "counter", "Scrub passes finished.", scrub_runs) +
           line("berth_scrub_last_checked_bytes", "gauge", "Bytes re-hashed by the last scrub pass.",
                last_scrub.bytes_checked) +
           line("berth_scrub_corrupt_total", "counter", "Corrupt blobs and manifests found by scrubbing.", corrupt_total);
}

}  // namespace berth::registry
