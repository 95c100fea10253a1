#pragma once
// Same-host clients are served without TCP pacing.
//
// BBR, the default on many hosts, paces every connection: each TSO burst
// (64 KiB on loopback) waits for its own timer. Between two processes on one
// host there is no bottleneck to pace for, and each timer is an interrupt (a
// VM exit in a guest). Measured on a 2-core VM with 100 MiB pulls over
// loopback: 0.50 server CPU-seconds per GiB under BBR, 0.14 under reno, and
// one connection moved 1.3 rather than 1.6 GiB/s.
//
// Pacing, once a socket has been set up for it, stays on when the congestion
// control is changed afterwards, so the choice is made on the listener, which
// accepted sockets inherit before theirs is initialised; a connection from
// another host is switched back to the system's choice when it is accepted.
#include <string>

namespace berth::http {

// The congestion control of a TCP socket (TCP_CONGESTION), "" if unknown.
std::string congestion_control(int fd);
// False, with errno set, when the kernel refuses: an unknown name, or one not
// in net.ipv4.tcp_allowed_congestion_control for an unprivileged process.
bool set_congestion_control(int fd, const std::string& name);

class SameHostCongestion {
public:
    // same_host: the congestion control for clients on this host; "" leaves
    // every connection on the system's. loopback_listener: the listener's
    // address is a loopback one, so no client can be on another host.
    // Returns an error message when the kernel refused (nothing changed).
    std::string configure_listener(int fd, const std::string& same_host, bool loopback_listener);
    // For each accepted socket, with whether its peer is on this host.
    void accepted(int fd, bool peer_on_same_host) const;

private:
    // On a listener that other hosts can reach: what their connections
    // inherit, and what they are switched to. Both "" when nothing to do.
    std::string same_host_, other_hosts_;
};

}  // namespace berth::http
