#pragma once
// Cluster membership and ownership, for the proxy and upload forwarding: which
// replica fetches a key from upstream registries for the whole cluster, and how
// to reach a replica. replication::Replicator implements it.
#include <optional>
#include <string>
#include <string_view>

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
    // How to reach a replica at HOST:PORT (TLS when replicas serve it).
    virtual net::Origin peer_origin(const std::string& address) const = 0;
    // HOST:PORT of the replica with that id, when known.
    virtual std::optional<std::string> address_of(const std::string& replica_id) const = 0;
    // The shared secret a request to another replica carries.
    virtual const std::string& secret() const = 0;
    // A key for one purpose (the web UI's sessions, paging cursors), the same on every replica and
    // never the secret itself (oci/derived_keys.hpp).
    virtual std::string derived_key(std::string_view purpose) const = 0;
};

}  // namespace berth::replication
