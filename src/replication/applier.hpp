#pragma once
// Applies change-log events from peers. Content comes first (blobs and child
// manifests are fetched and verified before anything references them), then
// the record, last writer wins by stamp. Applied events are logged again
// unchanged, so a replica relays what it learned to the others. What it
// writes is visible at once and durable once the caller calls
// MetaStore::sync(): callers sync once per batch of events, before they
// acknowledge them or move a cursor past them, so a batch costs one fsync.
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <optional>
#include <string>
#include <vector>

#include "berth/replication/options.hpp"
#include "berth/storage/events.hpp"
#include "berth/storage/meta_store.hpp"
#include "peer_client.hpp"

namespace berth::storage {
class BlobStore;
class MetaStore;
class HybridClock;
}  // namespace berth::storage

namespace berth::replication {

enum class ApplyResult {
    applied,
    skipped,      // this replica already holds something as new or newer
    gone,         // the sources no longer have the content: a later event explains why
    unavailable,  // no source could be reached; try again later
    vanished,     // (apply_manifest only) every source said the manifest itself is not there: deleted
};

// A peer's event or state record names what this replica stores and logs, and what its log tells
// receivers: false when a name breaks the rules a client's push meets (a repository, a tag, a digest,
// or an origin that is no replica id). An empty tag or digest is one the record does not have.
bool well_named(const std::string& repo, const storage::Stamp& stamp, const std::string& tag,
                const std::string& digest);

struct ManifestContent {
    std::string media_type;
    std::string bytes;
};

class Applier {
public:
    // Manifests of mirrored repositories are applied without their blobs, and
    // those of sparse ones without all their content (ContentRules).
    Applier(storage::BlobStore& blobs, storage::MetaStore& meta, storage::HybridClock& clock, ContentRules rules);

    // sources: the peer the event came from first, then any other peer.
    // content: a manifest event's bytes when they came with it.
    ApplyResult apply(const storage::Event& event, const std::vector<PeerClient*>& sources,
                      std::optional<ManifestContent> content = std::nullopt);
    ApplyResult apply_manifest(const std::string& repo, const std::string& digest, const storage::Stamp& stamp,
                               std::optional<ManifestContent> content, const std::vector<PeerClient*>& sources,
                               int depth = 0, const std::string& principal = {});
    ApplyResult ensure_blob(const oci::Digest& digest, const std::vector<PeerClient*>& sources);
    // Every one of them, those missing fetched `parallelism` at a time (so their
    // round trips and fsyncs overlap); stops early once `stop` is set. The
    // worst result: unavailable before gone before anything else.
    ApplyResult ensure_blobs(const std::vector<oci::Digest>& digests, const std::vector<PeerClient*>& sources,
                             unsigned parallelism, const std::atomic<bool>* stop = nullptr);

    // A page of a peer's state (bootstrap), as one batch: records this replica
    // holds as new or newer are skipped, blobs missing here are fetched
    // `parallelism` at a time, and what can be applied is committed together.
    // A record whose content is not in the page (children of an index, a
    // manifest missing its blobs) goes the way of a single event.
    ApplyResult apply_state(storage::StatePart part, std::vector<storage::StateRecord>& records,
                            const std::vector<PeerClient*>& sources, unsigned parallelism,
                            const std::atomic<bool>* stop);

    std::uint64_t bytes_fetched() const { return bytes_fetched_; }

private:
    ApplyResult apply_link(const storage::Event& event, const std::vector<PeerClient*>& sources);
    ApplyResult apply_tag(const storage::Event& event, const std::vector<PeerClient*>& sources);
    ApplyResult apply_deletion(const storage::Event& event);
    void keep_overtaken_tag(const storage::Event& event);
    void keep_overtaken_push(const storage::Event& event);
    ApplyResult apply_links(std::vector<storage::StateRecord*>& records, const std::vector<PeerClient*>& sources,
                            unsigned parallelism, const std::atomic<bool>* stop);
    ApplyResult apply_manifests(std::vector<storage::StateRecord*>& records, const std::vector<PeerClient*>& sources,
                                unsigned parallelism, const std::atomic<bool>* stop);
    struct ManifestPage;
    void sort_manifest(storage::StateRecord* record, ManifestPage& page);
    void commit_manifests(ManifestPage& page);
    ApplyResult apply_tags(std::vector<storage::StateRecord*>& records, const std::vector<PeerClient*>& sources);

    bool is_mirrored(const std::string& repo) const { return rules_.mirrored && rules_.mirrored(repo); }

    storage::BlobStore& blobs_;
    storage::MetaStore& meta_;
    storage::HybridClock& clock_;
    std::atomic<std::uint64_t> bytes_fetched_{0};
    const ContentRules rules_;
    // Blobs being fetched now: a second fetch of the same digest (two peers'
    // bootstraps, a follower and a read) waits for the first instead.
    std::mutex fetching_mutex_;
    std::condition_variable fetched_;
    std::set<std::string> fetching_;
};

}  // namespace berth::replication
