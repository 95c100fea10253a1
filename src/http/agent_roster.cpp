#include "berth/http/agent_roster.hpp"

namespace berth::http {

void AgentRoster::forget_silent_locked(Clock::time_point now) const {
    std::erase_if(agents_, [&](auto& entry) { return now - entry.second.second > window; });
}

bool AgentRoster::heard(Agent agent) {
    const auto now = Clock::now();
    std::lock_guard lock(mutex_);
    forget_silent_locked(now);
    // By host: the address the replica saw, whatever port the agent told.
    auto key = agent.address.substr(0, agent.address.rfind(':'));
    if (agents_.size() >= max_agents && !agents_.count(key)) return false;
    agents_[key] = {std::move(agent), now};
    return true;
}

std::vector<AgentRoster::Agent> AgentRoster::agents() const {
    std::lock_guard lock(mutex_);
    forget_silent_locked(Clock::now());
    std::vector<Agent> out;
    out.reserve(agents_.size());
    for (auto& [address, entry] : agents_) out.push_back(entry.first);
    return out;
}

}  // namespace berth::http
