#include "congestion.hpp"

#include <cerrno>
#include <cstring>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

namespace berth::http {

std::string congestion_control(int fd) {
    char name[64] = {};
    socklen_t length = sizeof name - 1;
    if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &length) != 0) return {};
    return std::string(name, ::strnlen(name, length));
}

bool set_congestion_control(int fd, const std::string& name) {
    return ::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(), static_cast<socklen_t>(name.size())) == 0;
}

std::string SameHostCongestion::configure_listener(int fd, const std::string& same_host, bool loopback_listener) {
    same_host_.clear();
    other_hosts_.clear();
    if (same_host.empty()) return {};
    const auto system = congestion_control(fd);
    if (system.empty() || system == same_host) return {};
    if (!set_congestion_control(fd, same_host))
        return "cannot use congestion control \"" + same_host + "\": " + std::strerror(errno);
    if (!loopback_listener) {
        same_host_ = same_host;
        other_hosts_ = system;
    }
    return {};
}

void SameHostCongestion::accepted(int fd, bool peer_on_same_host) const {
    if (peer_on_same_host || other_hosts_.empty()) return;
    // A route's own choice (ip route ... congctl) is given to the socket in
    // place of the listener's; that one stays. A failure leaves the
    // connection working, only not paced.
    if (congestion_control(fd) == same_host_) set_congestion_control(fd, other_hosts_);
}

}  // namespace berth::http
