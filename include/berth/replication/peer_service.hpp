#pragma once
// What the HTTP layer asks of replication: the peer API's answers
// (replication/protocol.hpp), the secret that admits a peer, and readiness.
// Every answer reads this replica's own state only, never through to other
// peers, so two replicas missing the same thing cannot ask each other forever.
// replication::Replicator implements it.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "berth/net/client.hpp"
#include "berth/replication/protocol.hpp"
#include "berth/storage/blob_store.hpp"

namespace berth::replication {

// Another replica as this one last heard from it (its status is asked every two seconds, off any
// request's path).
struct PeerView {
    std::string address, id;
    std::optional<protocol::Status> status;  // its own answer, when it gave one
    std::string versions;                    // the protocol versions it says it speaks
    std::string error;                       // why it did not answer, when it did not
};
struct ClusterView {
    protocol::Status self;
    std::vector<PeerView> peers;
};

class PeerService {
public:
    virtual ~PeerService() = default;
    // Whether a request's secret is the cluster's.
    virtual bool authorized(std::string_view secret) const = 0;
    // True once this replica has caught up with every peer it could reach.
    virtual bool ready() const = 0;
    // Peers refused for their protocol version, and why; empty when none.
    virtual std::string incompatible_peers() const = 0;
    // This replica's state as its status answer tells it.
    virtual protocol::Status status() const = 0;
    virtual std::string status_json() const = 0;
    // Every replica's state, this one's now and the others' as last heard (the web UI's cluster page).
    virtual ClusterView cluster_view() const = 0;
    // A key for one purpose (the web UI's sessions, paging cursors), the same on every replica and
    // never the secret itself (oci/derived_keys.hpp).
    virtual std::string derived_key(std::string_view purpose) const = 0;
    // Where an upload session's owner is (its id names it), and a request to it authenticated as
    // this replica (Cluster::open_peer): upload forwarding.
    virtual const std::string& self_id() const = 0;
    virtual std::optional<std::string> address_of(const std::string& replica_id) const = 0;
    virtual std::unique_ptr<net::Exchange> open_peer(const std::string& address, net::RequestHead head) const = 0;

    // caller: the asking replica's id, whose cursor the request's `after` is. Status 200, or
    // 410 when entries after it were compacted away.
    virtual std::pair<int, std::string> log_json(const protocol::LogRequest& request,
                                                 const std::string& caller) const = 0;
    virtual std::string state_json(const protocol::StateRequest& request, const std::string& caller) const = 0;
    virtual std::optional<storage::OpenBlob> blob_file(const std::string& digest) const = 0;
    // (media type, bytes) of a live manifest.
    virtual std::optional<std::pair<std::string, std::string>> manifest_content(const std::string& repo,
                                                                                const std::string& digest) const = 0;
    // The stamp of a live record (protocol::RecordAnswer); nullopt when none is held.
    virtual std::optional<std::string> record_json(const protocol::RecordRequest& request) const = 0;
    // A page of a repository's pull times, for the replica judging its retention.
    virtual std::string pulls_json(const protocol::PullsRequest& request) const = 0;
    // This replica's promise for a new immutable tag: granted when it holds nothing for the
    // tag or the same digest (recording the promise durably first).
    virtual protocol::ClaimAnswer answer_claim(const protocol::ClaimRequest& request) = 0;
    // Applies events another replica pushed for its write quorum, fetching
    // content from it (or any peer); returns once they are durable here.
    virtual void apply_pushed(const std::string& origin, const protocol::ApplyRequest& pushed) = 0;
};

}  // namespace berth::replication
