#pragma once
// Garbage collection and scrubbing, both safe to run while the registry serves.
//
// Garbage collection works down from what is reachable: a blob is kept while
// any repository links it; a link is kept while a live manifest of its
// repository references it, or while it is younger than the grace period (an
// upload whose manifest has not arrived yet, the race Distribution's offline
// GC loses). Blob files go only when no link holds them and they are older
// than the grace period, checked atomically against uploads that reuse them.
#include <atomic>
#include <chrono>
#include <optional>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "berth/oci/digest.hpp"
#include "berth/storage/hybrid_clock.hpp"
#include "berth/observe/metrics.hpp"

namespace berth::storage {
class BlobStore;
class MetaStore;
}  // namespace berth::storage

namespace berth::registry {

struct GcOptions {
    std::chrono::seconds grace{3600};
    bool delete_untagged = false;                  // untagged, unreferenced manifests...
    std::chrono::seconds untagged_age{7 * 86400};  // ...older than this
    // Set on a blob store every replica shares: blobs are collected only if they were also
    // older than the grace at this moment, before which this replica has heard every peer's
    // links (the epoch: collect no blob here; another replica does).
    std::optional<std::chrono::system_clock::time_point> blobs_heard_until;
};

struct GcReport {
    std::vector<std::string> removed;  // one line per manifest, link or blob
    std::size_t manifests = 0, links = 0, blobs = 0;
    std::uint64_t bytes_freed = 0, blobs_kept = 0, bytes_kept = 0;
};

// dry_run reports what would go and changes nothing (and works on a read-only store).
GcReport collect_garbage(storage::BlobStore& blobs, storage::MetaStore& meta, storage::HybridClock& clock,
                         const std::string& replica_id, const GcOptions& options, bool dry_run,
                         std::chrono::system_clock::time_point now = std::chrono::system_clock::now());

struct ScrubReport {
    std::uint64_t blobs_checked = 0, bytes_checked = 0, manifests_checked = 0;
    std::vector<std::string> corrupt;     // digests quarantined (blobs) or reported (manifests)
    std::vector<std::string> missing;     // blobs a repository links that the store does not hold
    std::vector<std::string> repaired;    // corrupt or missing blobs the store holds again
    std::vector<std::string> unrepaired;  // ...and those nothing could give back
};

// How scrub gets a lost blob back, beyond the store's own copy (BlobStore::mend).
struct ScrubRepair {
    // Asks for a blob from wherever repo could read it (a peer's copy); true once it returned.
    std::function<bool(const std::string& repo, const oci::Digest& digest)> from;
    // Repositories whose blobs are a cache (a mirror's): one the store dropped is fetched again
    // when read, and is no loss.
    std::function<bool(const std::string& repo)> cached;
};

// Re-hashes every stored manifest and every stored blob (past any cache) at no more than
// bytes_per_second; a corrupt blob is quarantined and at once repaired where it can be; then
// finds and repairs the blobs a repository links that the store lacks.
ScrubReport scrub(storage::BlobStore& blobs, storage::MetaStore& meta, std::uint64_t bytes_per_second,
                  const std::atomic<bool>& stop, const ScrubRepair& repair = {});

// The latest results, for /metrics.
struct MaintenanceStats {
    std::mutex mutex;
    GcReport last_gc;
    ScrubReport last_scrub;
    std::uint64_t gc_runs = 0, scrub_runs = 0, corrupt_total = 0, missing_total = 0, repaired_total = 0;
    void write_metrics(observe::MetricsWriter& out);
};

}  // namespace berth::registry
