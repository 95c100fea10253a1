#pragma once
// Upstream registries berth mirrors (registry proxying, distribution-spec
// main: the `ns` query parameter), and the node-local agent, whose one
// upstream is the registry's own replicas.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace berth::proxy {

struct Upstream {
    // The `ns` value and repository name prefix ("docker.io"); empty: every
    // name, sent on unchanged (the agent's replicas).
    std::string host;
    // Base URLs; the agent may list several replicas, or one name that
    // resolves to all of them. Every address is tried before a fetch fails.
    std::vector<std::string> urls;
    std::string ca_file;  // empty: the system's trust store
    bool insecure = false;
    std::string cert_file, key_file;           // client certificate (mTLS), the agent's
    std::string username, password;            // Basic, and for the token flow
    std::chrono::seconds check_interval{300};  // a cached tag is re-validated this often
    unsigned max_concurrent = 16;
    // Overall deadline for one manifest, tag list or token answer, head and
    // body, however slowly its bytes trickle; a blob gets this plus its size
    // at min_bytes_per_second.
    std::chrono::seconds fetch_timeout{30};
    std::uint64_t min_bytes_per_second = 64 << 10;
    // URL prefixes a token realm must start with; empty: any realm the
    // upstream names (the docker token flow), credentials included.
    std::vector<std::string> token_realms;
    std::string address_book;  // the agent's replicas: remote::Config::address_book
};

// The mirror files that point a node's container runtime at its agent (agent.runtime), written by
// `berth agent-runtime apply` in the DaemonSet's init container (docs/node-agent.md). A path is
// written only where its runtime is installed (its parent directory exists); "" skips it.
struct RuntimeFiles {
    std::string mirror;  // the agent as the runtime reaches it: "http://" + listen
    // Registries given a file of their own (containerd's _default covers the rest; CRI-O has no
    // catch-all, so it mirrors only these). Each file keeps the registry itself as the next host.
    std::vector<std::string> registries;
    std::string containerd_hosts_dir = "/etc/containerd/certs.d";
    std::string containerd_config = "/etc/containerd/config.toml";  // read only: is config_path set?
    std::string crio_dir = "/etc/containers/registries.conf.d";
    std::vector<std::string> registries_yaml = {"/etc/rancher/k3s/registries.yaml",
                                                "/etc/rancher/rke2/registries.yaml"};
    // Where the node's / is seen from here: "/host" in the DaemonSet, which mounts the node's /etc
    // there (read only in the agent, which only checks; writable in the init container).
    std::string host_root = "/";
};

// agent.peers: node agents sharing blobs in a burst (docs/node-agent.md, "Bursts"). A blob's
// agents are ranked by rendezvous hashing over the agents the replicas list; the first `seeds`
// fetch it from the replicas, every other from the agent above it in the blob's tree, which
// serves the bytes while they arrive. Agents reach each other over mTLS with their own
// certificate (which names server_name) and verify every blob before a runtime gets it.
struct AgentPeering {
    std::string listen;                          // HOST:PORT of the listener for fellow agents
    std::uint16_t port = 0;                      // its port, told to the replicas
    std::string address;                         // the IP fellow agents reach; "": as the replicas see this agent
    std::string node;                            // the node's name, for people; "": the host name
    unsigned seeds = 2;                          // agents that fetch a blob from the replicas in a burst
    std::string ca_file;                         // signs fellow agents' certificates; "": agent.ca_file
    std::string server_name = "berth-agent";     // the name every agent's certificate carries
    std::chrono::seconds announce_interval{10};  // how often the replicas are told, and the list read
};

struct Options {
    std::vector<Upstream> upstreams;
    // Agent mode: one catch-all upstream (the replicas), no replication.
    bool agent = false;
    // Who decides what the agent serves (agent.authorize): the replicas, asked with each
    // caller's own credentials; or the agent's own credentials, the same for every caller
    // on the node (single-tenant nodes only). docs/node-agent.md.
    enum class Authorize { caller, agent } agent_authorize = Authorize::caller;
    std::chrono::seconds agent_decision_ttl{10};  // a caller's allowed or refused repository is asked again after
    std::chrono::seconds agent_outage_ttl{3600};  // and still holds while the replicas cannot be asked
    // Blob bytes kept before the least recently used are evicted; 0: no bound.
    std::uint64_t cache_max_bytes = 0;
    std::optional<RuntimeFiles> runtime;  // agent.runtime
    std::optional<AgentPeering> peers;    // agent.peers; unset: every blob from the replicas
    // agent.keep_images: what the node needs to start the cluster (the replicas' and the agent's own
    // images, pause, CNI, CoreDNS), fetched while the replicas answer and never evicted from the cache.
    struct Image {
        std::string repository, reference;  // "docker.io/library/berth", "0.1.0" or "sha256:..."
    };
    std::vector<Image> keep_images;
    std::chrono::seconds keep_interval{300};  // how often the kept images are made whole again
    // agent.preheat: repositories (globs, as the replicas name them) whose tags, when they move, the
    // agent fetches before any pod asks, read from the replicas' event feed every preheat_interval.
    std::vector<std::string> preheat;
    std::chrono::seconds preheat_interval{10};

    bool enabled() const { return !upstreams.empty(); }
};

// The upstream that repo (HOST/NAME) mirrors, as an index into options.upstreams, and NAME;
// nullopt when none. An upstream without a host (the agent's) takes every name.
std::optional<std::pair<std::size_t, std::string>> mirrored_name(const Options& options, const std::string& repo);
inline bool mirrors(const Options& options, const std::string& repo) {
    return mirrored_name(options, repo).has_value();
}

}  // namespace berth::proxy
