#pragma once
// Node agents sharing a pull burst (proxy/options.hpp AgentPeering): which fellow agents there
// are (every replica lists those it heard from), and which of them to fetch a blob from. A blob's
// agents are ranked by rendezvous hashing, so every agent ranks them alike with no one to ask:
// the first `seeds` fetch from the replicas, and each other agent from its parent in the blob's
// tree (chains while they are short, a binary tree beyond), which serves the bytes as they arrive.
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "berth/net/client.hpp"
#include "berth/oci/digest.hpp"
#include "berth/observe/metrics.hpp"
#include "berth/proxy/options.hpp"
#include "berth/remote/registry_client.hpp"

namespace berth::proxy {

// The agents above `self` in the digest's tree over `agents` (self among them), nearest first,
// up to a seed; empty when self is one of the `seeds` first ranked (or not listed).
std::vector<std::string> ancestors(const std::string& digest, const std::vector<std::string>& agents,
                                   const std::string& self, std::size_t seeds);

class AgentPeers {
public:
    AgentPeers(const AgentPeering& options, const Upstream& replicas);

    // Tells every replica where this agent listens, and learns the agents they heard from.
    void announce(remote::RegistryClient& replicas);
    // The fellow agents to fetch the blob from, nearest first (this agent's parent, then the
    // parent's parent, at most three); empty when this agent is one of the blob's seeds.
    std::vector<std::string> sources(const std::string& digest) const;
    // A GET of repository `name`'s blob at a fellow agent, its bytes from offset on. Throws
    // net::Error when the agent cannot be reached or stalls.
    remote::Opened open(const std::string& address, const std::string& name, const oci::Digest& digest,
                        std::uint64_t offset);
    // An agent that served bytes of another digest is skipped for a while.
    void distrust(const std::string& address);

    enum class Failure { unreachable, refused, corrupt };
    void failed(Failure why) { ++failures_[static_cast<int>(why)]; }
    std::atomic<std::uint64_t> bytes_from_agents{0};
    void write_metrics(observe::MetricsWriter& out) const;

private:
    using Clock = std::chrono::steady_clock;
    AgentPeering options_;
    net::TlsOptions tls_;
    net::Client client_;
    mutable std::mutex mutex_;
    std::string self_;                 // this agent's address as the replicas list it
    std::vector<std::string> agents_;  // every agent the replicas listed, this one included
    mutable std::map<std::string, Clock::time_point> distrusted_;
    std::atomic<std::uint64_t> failures_[3]{};
};

}  // namespace berth::proxy
