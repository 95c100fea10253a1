#pragma once
// The node agent's door (agent.authorize "caller"): before anything is served
// from the node's cache or fetched for a caller, the replicas are asked, with
// that caller's own credentials, whether it may pull the repository
// (auth::access_path); their 401 or 403 is the agent's answer, and only their
// explicit allow lets the caller in. Decisions are remembered per credential and repository for
// agent.decision_seconds, and through an outage of the replicas for
// agent.outage_decision_seconds. docs/node-agent.md.
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "berth/auth/delegated.hpp"
#include "berth/observe/metrics.hpp"
#include "berth/remote/registry_client.hpp"

namespace berth::proxy {

class AgentGate : public auth::DelegatedAccess {
public:
    // replicas: how the agent reaches them, without its own credentials (answer_challenges off).
    struct DecisionTtl {
        std::chrono::seconds fresh;   // asked again after this
        std::chrono::seconds outage;  // still used while the replicas cannot be asked
    };
    // kept: the repositories of agent.keep_images, which any caller on the node may read while no
    // replica answers: they start the cluster, a cold start among them (docs/node-agent.md).
    AgentGate(net::Client& client, remote::Config replicas, DecisionTtl ttl, std::set<std::string> kept);

    auth::Verdict check(const std::string& authorization, const std::string& repository,
                        const std::string& origin) override;
    auth::RelayedToken token(const std::string& authorization, const std::string& query) override;
    void write_metrics(observe::MetricsWriter& out) const;

private:
    using Clock = std::chrono::steady_clock;
    auth::Verdict ask(const std::string& authorization, const std::string& repository);
    // A replica's Bearer realm becomes this agent's /auth/token, which relays to them: a
    // node's clients may not reach the replicas' own address.
    std::string challenge_for(const std::string& challenge, const std::string& origin) const;
    void count(const auth::Verdict& verdict, bool cached);

    remote::RegistryClient replicas_;
    std::vector<net::HostPort> replica_addresses_;
    DecisionTtl ttl_;
    const std::set<std::string> kept_;
    std::mutex mutex_;
    struct Remembered {
        auth::Verdict verdict;
        Clock::time_point asked;
    };
    std::unordered_map<std::string, Remembered> decisions_;    // hash of the credential, repository
    std::atomic<std::uint64_t> decisions_counted_[3][2] = {};  // allowed, denied, unavailable x asked, cached
};

}  // namespace berth::proxy
