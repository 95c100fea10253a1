#include "client_limits.hpp"

#include <algorithm>

namespace berth::http {

bool ClientLimits::open(const std::string& address) {
    std::lock_guard lock(mutex_);
    auto& client = clients_[address];
    if (max_connections_ && client.connections >= max_connections_) return false;
    ++client.connections;
    return true;
}

void ClientLimits::close(const std::string& address) {
    std::lock_guard lock(mutex_);
    auto it = clients_.find(address);
    if (it == clients_.end()) return;
    // Forget idle clients, so the table holds only addresses with connections.
    if (--it->second.connections == 0) clients_.erase(it);
}

bool ClientLimits::allow_request(const std::string& address) {
    if (!rate_) return true;
    std::lock_guard lock(mutex_);
    auto& client = clients_[address];
    const auto now = std::chrono::steady_clock::now();
    const double burst = 2.0 * rate_;
    if (client.refilled == std::chrono::steady_clock::time_point{}) client.tokens = burst;
    else
        client.tokens =
            std::min(burst, client.tokens + std::chrono::duration<double>(now - client.refilled).count() * rate_);
    client.refilled = now;
    if (client.tokens < 1) return false;
    client.tokens -= 1;
    return true;
}

}  // namespace berth::http
