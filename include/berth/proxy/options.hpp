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

    bool enabled() const { return !upstreams.empty(); }
};

// The upstream that repo (HOST/NAME) mirrors, as an index into options.upstreams, and NAME;
// nullopt when none. An upstream without a host (the agent's) takes every name.
std::optional<std::pair<std::size_t, std::string>> mirrored_name(const Options& options, const std::string& repo);
inline bool mirrors(const Options& options, const std::string& repo) {
    return mirrored_name(options, repo).has_value();
}

}  // namespace berth::proxy
