#pragma once
// One TCP connection attempt with a deadline: for start-up checks and probes that must not hang
// on a peer or a firewall that drops packets.
#include <sys/socket.h>

#include <chrono>

namespace berth::net {

// Connects to an IPv4 or IPv6 socket address, waiting at most `timeout` (a signal does not cut the
// wait short, and a zero or negative timeout takes only a connection made at once). Returns a
// descriptor the caller owns, non-blocking and close-on-exec; -1 when no connection was made.
int connect_within(const sockaddr* address, socklen_t length, std::chrono::milliseconds timeout);

}  // namespace berth::net
