#pragma once
// The node agents a replica has heard from lately. Every agent tells every replica where fellow
// agents reach it (POST /_berth/v1/agents, with its client certificate) and reads back the list;
// each agent then picks the same agents to fetch a blob from the replicas for everyone, by
// rendezvous hashing over that list (docs/node-agent.md, "Bursts"). Kept in memory: an agent
// that stops telling drops out after a window, and a restarted replica learns the list again
// within one round.
#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace berth::http {

class AgentRoster {
public:
    struct Agent {
        std::string address;  // HOST:PORT of its listener for fellow agents
        std::string node;     // the node's name, as the agent says (for people)
    };
    static constexpr std::chrono::seconds window{30};
    static constexpr std::size_t max_agents = 20000;

    // Records an agent (or hears it again): one per host address, the last port told; false when
    // the roster is full of others.
    bool heard(Agent agent);
    // Every agent heard within the window, by address.
    std::vector<Agent> agents() const;

private:
    using Clock = std::chrono::steady_clock;
    void forget_silent_locked(Clock::time_point now) const;
    mutable std::mutex mutex_;
    mutable std::map<std::string, std::pair<Agent, Clock::time_point>> agents_;
};

}  // namespace berth::http
