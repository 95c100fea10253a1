#pragma once
// Proxy internals shared by its source files.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "berth/net/client.hpp"
#include "berth/proxy/proxy.hpp"
#include "berth/storage/blob_store.hpp"
#include "berth/storage/meta_store.hpp"
#include "agent_gate.hpp"
#include "agent_peers.hpp"
#include "berth/remote/registry_client.hpp"

namespace berth::replication {
class Cluster;
}

namespace berth::proxy {

using Clock = std::chrono::steady_clock;

struct Counters {
    std::atomic<std::uint64_t> hits{0}, misses{0}, stale{0}, fetched_bytes{0}, coalesced{0}, errors{0};
    std::atomic<std::uint64_t> requests{0}, request_micros{0};  // upstream round trips and their time
};

struct UpstreamState {
    UpstreamState(net::Client& client, Upstream o, remote::Config remote_config)
        : options(std::move(o)), remote(client, std::move(remote_config)) {}
    Upstream options;
    remote::RegistryClient remote;
    Counters counters;
    // Whether the upstream is reachable, as its last answer or failure says (the web UI's mirrors).
    std::atomic<std::uint64_t> answered_ms{0}, failed_ms{0};
    std::mutex error_mutex;
    std::string last_error;
    void answered(int status);
    void failed(const std::string& why);
    std::mutex checked_mutex;
    std::unordered_map<std::string, Clock::time_point> checked;  // repo\0tag -> last confirmed upstream
};

// One fetch that any number of readers wait on.
struct BlobFlight {
    std::mutex mutex;
    std::condition_variable started;
    std::shared_ptr<storage::FillingBlob> filling;  // once the upstream's answer is in
    bool ended = false;                             // failed before any byte
    bool finished = false;                          // over: stored and linked, or failed (notifies `started`)
    std::exception_ptr refused;                     // why, when a quota refused the blob (readers rethrow it)
    std::set<std::string> repos;                    // to link once stored (under Impl::flights_mutex)
    registry::FetchIntake* intake = nullptr;        // the registry's way in (it waits for this flight)
};

struct ManifestFlight {
    std::mutex mutex;
    std::condition_variable done_cv;
    bool done = false;
    registry::ManifestAnswer answer;
};

struct Proxy::Impl {
    Impl(Options o, Limits l, storage::BlobStore& b, storage::MetaStore& m, const replication::Cluster* r);

    // The upstream repo mirrors and the name it has there; null when none.
    std::pair<UpstreamState*, std::string> find(const std::string& repo) const;
    // A GET of the replica owning a fetch (Cluster::open_peer authenticates it).
    net::RequestHead owner_request(const std::string& path, const net::Headers& extra = {}) const;
    void log_failure(UpstreamState& upstream, const std::string& what, const std::string& why);

    registry::ManifestAnswer manifest_now(UpstreamState& upstream, const std::string& name, const std::string& repo,
                                          const std::string& reference, const std::optional<std::string>& cached,
                                          registry::Asker asker);
    void run_flight(UpstreamState& upstream, std::string name, std::string repo, oci::Digest digest,
                    std::shared_ptr<BlobFlight> flight, registry::Asker asker);
    // Where a flight's bytes come from, tried in this order: the owning replica, the store (another
    // repository's copy, once the upstream confirms this one holds it), the upstream.
    bool fill_from_owner(UpstreamState& upstream, const std::string& repo, const oci::Digest& digest,
                         BlobFlight& flight);
    bool fill_from_store(UpstreamState& upstream, const std::string& name, const oci::Digest& digest,
                         BlobFlight& flight);
    void fill_from_upstream(UpstreamState& upstream, const std::string& name, const oci::Digest& digest,
                            BlobFlight& flight);
    // The node agent with fellow agents: from its parents in the blob's tree, then the replicas,
    // each source taking over where the last one stopped (agent_peers.hpp).
    void fill_shared(UpstreamState& upstream, const std::string& name, const oci::Digest& digest, BlobFlight& flight);
    void end_flight(BlobFlight& flight, const oci::Digest& digest);
    // Streams a 200 answer's body into the store through a FillingBlob published to flight.
    void receive(UpstreamState& upstream, remote::Opened& opened, const oci::Digest& digest, BlobFlight& flight,
                 bool from_upstream);
    // Whether the upstream says its repository `name` holds the blob (a HEAD).
    bool holds(UpstreamState& upstream, const std::string& name, const oci::Digest& digest);
    // The quotas asked before a byte of a blob this size is stored.
    void admit(BlobFlight& flight, const oci::Digest& digest, std::uint64_t size);

    Options options;
    Limits limits;
    net::Client client;
    storage::BlobStore& blobs;
    storage::MetaStore& meta;
    const replication::Cluster* cluster;
    std::vector<std::unique_ptr<UpstreamState>> upstreams;
    std::unique_ptr<AgentGate> gate;
    std::unique_ptr<AgentPeers> peers;  // agent.peers

    std::mutex flights_mutex;
    std::condition_variable flights_idle;
    std::map<std::string, std::shared_ptr<BlobFlight>> blob_flights;          // by digest
    std::map<std::string, std::shared_ptr<ManifestFlight>> manifest_flights;  // by repo\0reference
    std::size_t running = 0;                                                  // fetch threads alive

    std::mutex used_mutex;
    std::unordered_map<std::string, Clock::time_point> last_used;  // blobs read since start, for the LRU
};

}  // namespace berth::proxy
