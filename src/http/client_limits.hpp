#pragma once
// Per-client-address limits: open connections, and a request rate (token
// bucket with a burst of twice the rate).
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace berth::http {

class ClientLimits {
public:
    ClientLimits(std::size_t max_connections, std::uint32_t requests_per_second)
        : max_connections_(max_connections), rate_(requests_per_second) {}

    // False when the address already holds its share of connections.
    bool open(const std::string& address);
    void close(const std::string& address);
    bool allow_request(const std::string& address);

private:
    struct Client {
        std::size_t connections = 0;
        double tokens = 0;
        std::chrono::steady_clock::time_point refilled{};
    };
    std::size_t max_connections_;
    std::uint32_t rate_;
    std::mutex mutex_;
    std::unordered_map<std::string, Client> clients_;
};

}  // namespace berth::http
