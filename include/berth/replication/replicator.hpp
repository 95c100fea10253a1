#pragma once
// Peer replication: follows every peer's change log and applies it, serves
// this replica's log, state and content to peers, fetches what is missing on
// read, and waits for a write quorum. Everything a peer can ask for requires
// the shared secret.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "berth/oci/digest.hpp"
#include "berth/registry/peers.hpp"
#include "berth/registry/upstreams.hpp"
#include "berth/storage/blob_store.hpp"
#include "berth/replication/options.hpp"
#include "berth/replication/protocol.hpp"
#include "berth/storage/events.hpp"
#include "berth/observe/metrics.hpp"

namespace berth::storage {
class BlobStore;
class MetaStore;
class HybridClock;
class PullTimes;
}  // namespace berth::storage

namespace berth::replication {

class Replicator : public registry::Peers {
public:
    Replicator(Options options, std::string self_id, storage::BlobStore& blobs, storage::MetaStore& meta,
               storage::HybridClock& clock);
    ~Replicator() override;

    // Repositories mirroring an upstream replicate their manifests without blobs.
    void set_mirrors(const registry::Upstreams* mirrors);
    // Repository globs that accept manifests without all their content (registry::Options).
    void set_sparse(std::vector<std::string> globs);
    // This replica's pull times, which it serves to the replica judging a repository's retention.
    void set_pull_times(const storage::PullTimes* pulls);
    void start();
    void stop();

    const std::string& self_id() const;
    bool authorized(std::string_view secret) const;
    // True once this replica has caught up with every peer it could reach.
    bool ready() const;
    // Peers refused for their protocol version, and why; empty when none.
    std::string incompatible_peers() const;
    std::string status_json() const;
    void write_metrics(observe::MetricsWriter& out) const;

    // Serving peers. These read this replica's own state only, never through
    // to other peers, so two replicas missing the same thing cannot ask each other forever.
    // caller: the asking replica's id, whose cursor `after` is. Status 200, or
    // 410 when entries after `after` were compacted away.
    std::pair<int, std::string> log_json(std::uint64_t after, std::size_t limit, const std::string& caller) const;
    std::string state_json(const protocol::StateRequest& request, const std::string& caller) const;
    // The last sequence each known peer has read of this replica's log.
    std::vector<std::uint64_t> peer_cursors() const;
    std::optional<storage::OpenBlob> blob_file(const std::string& digest) const;
    // (media type, bytes) of a live manifest.
    std::optional<std::pair<std::string, std::string>> manifest_content(const std::string& repo,
                                                                        const std::string& digest) const;
    // {"clock","origin"[,"digest"]} of a live record: kind is link, manifest or tag.
    std::optional<std::string> record_json(const std::string& repo, protocol::RecordKind kind,
                                           const std::string& key) const;
    // A page of repo's pull times at or after since_ms (protocol.hpp: pulls).
    std::string pulls_json(const std::string& repo, std::uint64_t since_ms, const std::string& after) const;
    // Applies events another replica pushed for its write quorum, fetching
    // content from it (or any peer); returns once they are durable here.
    void apply_pushed(const std::string& origin, const protocol::ApplyRequest& pushed);

    registry::Lookup fetch_blob(const std::string& repo, const oci::Digest& digest) override;
    bool fetch_manifest(const std::string& repo, const std::string& reference) override;
    void replicate(const std::vector<storage::Event>& events) override;
    // Retention: the replica owning a repository (owner_of) judges it, once
    // this one has caught up; every other replica is asked for its pulls.
    bool evaluates(const std::string& repo) override;
    std::optional<std::vector<std::pair<std::string, std::uint64_t>>> pulls_elsewhere(const std::string& repo,
                                                                                      std::uint64_t since_ms) override;

    // HOST:PORT of the replica that fetches `key` from upstream registries for
    // the whole cluster (rendezvous hashing over the replicas reachable now);
    // nullopt when that is this one.
    std::optional<std::string> owner_of(std::string_view key) const;
    // How to reach a replica at HOST:PORT (TLS when replicas serve it).
    net::Origin peer_origin(const std::string& address) const;
    // HOST:PORT of the replica with that id, when known.
    std::optional<std::string> address_of(const std::string& replica_id) const;
    const std::string& secret() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// The last change-log sequence that may go: written before the retention
// window, and read by every peer known (peer_cursors), unless the log holds
// more than the cap, past which a peer that stopped reading re-bootstraps.
std::uint64_t log_compaction_point(const storage::MetaStore& meta, const LogRetention& retention,
                                   const std::vector<std::uint64_t>& peer_cursors, std::uint64_t now_ms);
// Compacts to that point; replicator may be null (no peers).
void compact_log(storage::MetaStore& meta, const LogRetention& retention, Replicator* replicator);

}  // namespace berth::replication
