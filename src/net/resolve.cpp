#include "berth/net/resolve.hpp"

#include <netdb.h>
#include <sys/socket.h>

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

}  // namespace berth::net
