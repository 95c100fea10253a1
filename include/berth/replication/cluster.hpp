#pragma once
// Cluster membership and ownership, for the proxy and upload forwarding: which
// replica fetches a key from upstream registries for the whole cluster, and how
// to reach a replica. replication::Replicator implements it.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "berth/net/client.hpp"

namespace berth::replication {

class Cluster {
public:
    virtual ~Cluster() = default;
    virtual const std::string& self_id() const = 0;
    // HOST:PORT of the replica that fetches `key` from upstream registries for
    // the whole cluster (rendezvous hashing over the replicas reachable now);
    // nullopt when that is this one.
    virtual std::optional<std::string> owner_of(std::string_view key) const = 0;
    // Whether this replica is the one rendezvous hashing names for key among the ready replicas it
    // reaches (peers by their last status): for work one replica does at a time, which a replica
    // still catching up must not take (notification delivery). False while this one is not ready.
    virtual bool leads(std::string_view key) const = 0;
    // HOST:PORT of the replica with that id, when known.
    virtual std::optional<std::string> address_of(const std::string& replica_id) const = 0;
    // A request to the replica at HOST:PORT, authenticated as this replica: the cluster's secret
    // never leaves replication. The body follows through the exchange (head.has_body). Throws
    // net::Error when it cannot be reached. Blocking: for threads that may wait on the peers.
    virtual std::unique_ptr<net::Exchange> open_peer(const std::string& address, net::RequestHead head) const = 0;
    // The same with the whole answer, at most limit bytes.
    virtual net::Response ask_peer(const std::string& address, net::RequestHead head, std::size_t limit) const = 0;
    // HOST:PORT of every other replica, reachable or not.
    virtual std::vector<std::string> peer_addresses() const = 0;
    // Wall-clock ms (since the epoch) before which every change a peer made is here: the oldest of
    // the moments each peer's log was last asked for and read to its head; 0 while a peer's log has
    // not been read to its head since this replica started, or DNS has not yet named its peers. A
    // peer failing to answer for gone_after (since its first failure after its log was last read
    // to its head) no longer counts; one failing for less still does, since what it pushed here may
    // be newer than changes of its that are not here yet.
    virtual std::uint64_t heard_until_ms(std::chrono::milliseconds gone_after) const = 0;
    // Still copying a peer's log or state since it started (or since a peer compacted past it): a
    // peer failing to answer for gone_after, or whose protocol is refused, does not count.
    virtual bool catching_up(std::chrono::milliseconds gone_after) const = 0;
};

}  // namespace berth::replication
