#pragma once
// Peer replication: follows every peer's change log and applies it, serves
// this replica's log, state and content to peers, fetches what is missing on
// read, and waits for a write quorum. Everything a peer can ask for requires
// the shared secret.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "berth/oci/digest.hpp"
#include "berth/registry/peers.hpp"
#include "berth/replication/cluster.hpp"
#include "berth/replication/options.hpp"
#include "berth/replication/peer_service.hpp"
#include "berth/storage/blob_store.hpp"
#include "berth/replication/protocol.hpp"
#include "berth/storage/events.hpp"
#include "berth/observe/metrics.hpp"

namespace berth::storage {
class BlobStore;
class MetaStore;
class HybridClock;
class PullTimes;
class BackupJob;
}  // namespace berth::storage

namespace berth::replication {

// Following the other replicas' logs (bootstrap, applying): what the node
// starts and stops.
class Follower {
public:
    virtual ~Follower() = default;
    virtual void start() = 0;
    // Ends following, and waits for quorum pushes still talking to peers.
    virtual void stop() = 0;
    virtual void write_metrics(observe::MetricsWriter& out) const = 0;
};

// One replica's part in the cluster. Its audiences each see it through their own interface:
// the proxy and upload forwarding as Cluster (membership, ownership; membership.cpp), the
// node as Follower (follower.cpp, bootstrap.cpp), the HTTP layer as PeerService (serving.cpp),
// and the registry and retention as registry::Peers (quorum.cpp, pulls.cpp). They share one
// state: the peers, their reachability and cursors (replicator_impl.hpp).
class Replicator final : public Cluster, public Follower, public PeerService, public registry::Peers {
public:
    // pulls: this replica's pull times, which it serves to the replica judging a repository's retention;
    // backups: the backups it takes, whose last one its status tells (null: none).
    Replicator(Options options, std::string self_id, storage::BlobStore& blobs, storage::MetaStore& meta,
               storage::HybridClock& clock, const storage::PullTimes& pulls, ContentRules rules = {},
               const storage::BackupJob* backups = nullptr);
    ~Replicator() override;

    // Cluster (and PeerService's part of it)
    const std::string& self_id() const override;
    std::optional<std::string> owner_of(std::string_view key) const override;
    std::optional<std::string> address_of(const std::string& replica_id) const override;
    bool leads(std::string_view key) const override;
    std::unique_ptr<net::Exchange> open_peer(const std::string& address, net::RequestHead head) const override;
    net::Response ask_peer(const std::string& address, net::RequestHead head, std::size_t limit) const override;
    std::vector<std::string> peer_addresses() const override;
    std::uint64_t heard_until_ms(std::chrono::milliseconds gone_after) const override;
    bool catching_up(std::chrono::milliseconds gone_after) const override;
    std::string derived_key(std::string_view purpose) const override;

    // Follower
    void start() override;
    void stop() override;
    void write_metrics(observe::MetricsWriter& out) const override;

    // PeerService
    bool authorized(std::string_view secret) const override;
    bool ready() const override;
    std::string incompatible_peers() const override;
    protocol::Status status() const override;
    std::string status_json() const override;
    ClusterView cluster_view() const override;
    std::pair<int, std::string> log_json(const protocol::LogRequest& request, const std::string& caller) const override;
    std::string state_json(const protocol::StateRequest& request, const std::string& caller) const override;
    std::optional<storage::OpenBlob> blob_file(const std::string& digest) const override;
    std::optional<std::pair<std::string, std::string>> manifest_content(const std::string& repo,
                                                                        const std::string& digest) const override;
    std::optional<std::string> record_json(const protocol::RecordRequest& request) const override;
    std::string pulls_json(const protocol::PullsRequest& request) const override;
    void apply_pushed(const std::string& origin, const protocol::ApplyRequest& pushed) override;
    protocol::ClaimAnswer answer_claim(const protocol::ClaimRequest& request) override;

    // registry::Peers: read-through, the write quorum, and retention's questions.
    registry::Lookup fetch_blob(const std::string& repo, const oci::Digest& digest) override;
    bool fetch_manifest(const std::string& repo, const std::string& reference) override;
    void replicate(const std::vector<storage::Event>& events) override;
    registry::TagClaim claim_tag(const std::string& repo, const std::string& tag, const std::string& digest) override;
    // Retention: the replica owning a repository (owner_of) judges it, once
    // this one has caught up; every other replica is asked for its pulls.
    bool evaluates(const std::string& repo) override;
    std::optional<std::vector<std::pair<std::string, std::uint64_t>>> pulls_elsewhere(const std::string& repo,
                                                                                      std::uint64_t since_ms) override;

    // Wall-clock ms before which every change any known peer made is here, reachable or not (0
    // while one has never been read to its head): what a store every replica shares may collect.
    std::uint64_t heard_from_every_peer_until_ms() const;
    // The last sequence each known peer has read of this replica's log (log compaction).
    std::vector<std::uint64_t> peer_cursors() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// The last change-log sequence that may go: written before the retention
// window, and read by every peer known (peer_cursors), unless the log holds
// more than the cap, past which a peer that stopped reading re-bootstraps.
std::uint64_t log_compaction_point(const storage::MetaStore& meta, const LogRetention& retention,
                                   const std::vector<std::uint64_t>& peer_cursors, std::uint64_t now_ms);
// Compacts to that point; replicator may be null (no peers). readers: the last sequence each of
// this replica's other readers of its log has read (notification endpoints), kept like peers'.
void compact_log(storage::MetaStore& meta, const LogRetention& retention, Replicator* replicator,
                 const std::vector<std::uint64_t>& readers = {});

}  // namespace berth::replication
