#pragma once
// Registry proxying: a repository named HOST/NAME mirrors NAME at the upstream
// configured for HOST. A miss is fetched once however many ask (every waiting
// client streams the bytes as they arrive), verified, stored and replicated
// like a push; a cached tag is re-validated with one HEAD per interval; when
// the upstream is out of reach what is stored is served as it is. With
// replicas, each digest's and tag's fetch belongs to one of them (rendezvous
// hashing), so a cluster asks the upstream once.
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>

#include "berth/net/client.hpp"
#include "berth/proxy/options.hpp"
#include "berth/registry/upstreams.hpp"
#include "berth/observe/metrics.hpp"

namespace berth::storage {
class BlobStore;
class MetaStore;
class HybridClock;
}  // namespace berth::storage
namespace berth::replication {
class Cluster;
}
namespace berth::auth {
class DelegatedAccess;
}

namespace berth::proxy {

struct Limits {
    std::size_t max_manifest_bytes = 4 << 20;
    std::uint64_t max_blob_bytes = 0;  // 0: none
    std::uint64_t min_free_bytes = 0;  // a fetch that would leave less free is refused
};

class Proxy : public registry::Upstreams {
public:
    // cluster may be null (a single registry, or the agent).
    Proxy(Options options, Limits limits, storage::BlobStore& blobs, storage::MetaStore& meta,
          const replication::Cluster* cluster);
    ~Proxy() override;

    bool mirrors(const std::string& repo) const override;
    std::string default_host() const override;
    registry::ManifestAnswer fetch_manifest(const std::string& repo, const std::string& reference,
                                            const std::optional<std::string>& cached, registry::Asker asker) override;
    std::optional<storage::OpenBlob> fetch_blob(const std::string& repo, const oci::Digest& digest,
                                                registry::Asker asker, registry::FetchIntake& intake) override;
    void finish_fetches() override;
    std::optional<registry::TagPage> list_tags(const std::string& repo, std::size_t limit,
                                               const std::string& last) override;
    void count(const std::string& repo, registry::Cache cache) override;
    void touched(const oci::Digest& digest) override;
    std::vector<registry::MirrorStatus> mirror_status() const override;

    void write_metrics(observe::MetricsWriter& out) const;
    // The agent's door when the replicas decide who reads (agent.authorize "caller"); null otherwise.
    auth::DelegatedAccess* agent_access();
    // The node agent with agent.peers: tells every replica where it listens for fellow agents and
    // learns the others (every 10 s).
    void announce_agent();
    // A GET of the replicas' own API (the node agent reading their event feed), with the agent's
    // credentials; at most limit bytes of answer. Throws net::Error when no replica answers.
    net::Response ask_replicas(const std::string& path, std::size_t limit);
    // Blob fetches under way: a preheat waits for live pulls to finish.
    std::size_t fetches_in_flight() const;
    // Evicts the least recently used blobs beyond cache.max_bytes, never those in kept; returns how many.
    std::size_t trim_cache(const std::unordered_set<std::string>& kept);

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace berth::proxy
