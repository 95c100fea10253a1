#include "berth/net/resolve.hpp"

#include "berth/net/connect.hpp"

#include <netdb.h>
#include <unistd.h>

#include <algorithm>

namespace berth::net {

std::vector<HostPort> resolve(const HostPort& name) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* result = nullptr;
    if (getaddrinfo(name.host.c_str(), name.port.c_str(), &hints, &result) != 0) return {};
    std::vector<HostPort> out;
    for (auto* ai = result; ai; ai = ai->ai_next) {
        char text[NI_MAXHOST];
        if (getnameinfo(ai->ai_addr, ai->ai_addrlen, text, sizeof text, nullptr, 0, NI_NUMERICHOST) != 0) continue;
        HostPort address{text, name.port};
        if (std::find(out.begin(), out.end(), address) == out.end()) out.push_back(std::move(address));
    }
    freeaddrinfo(result);
    return out;
}

namespace {

bool connects(const HostPort& numeric, std::chrono::milliseconds timeout) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
    addrinfo* found = nullptr;
    if (::getaddrinfo(numeric.host.c_str(), numeric.port.c_str(), &hints, &found) != 0) return false;
    const int fd = connect_within(found->ai_addr, found->ai_addrlen, timeout);
    ::freeaddrinfo(found);
    if (fd < 0) return false;
    ::close(fd);
    return true;
}

}  // namespace

bool accepts_connections(const std::string& address, std::chrono::milliseconds timeout) {
    std::vector<HostPort> addresses;
    try {
        addresses = resolve(parse_host_port(address));
    } catch (const std::exception&) {
        return false;  // not an address: nothing can answer there
    }
    return std::any_of(addresses.begin(), addresses.end(), [&](auto& numeric) { return connects(numeric, timeout); });
}

}  // namespace berth::net
