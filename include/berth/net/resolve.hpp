#pragma once
// Name resolution, blocking: for start-up checks, discovery threads and the command line.
#include <chrono>
#include <string>
#include <vector>

#include "berth/net/host_port.hpp"

namespace berth::net {

// Every address the name resolves to, as HOST:PORT with the numeric host
// ("10.0.0.7:5000", "[fd00::7]:5000"); empty when it does not resolve.
std::vector<HostPort> resolve(const HostPort& name);

// Whether anything accepts a TCP connection at HOST:PORT (any address it resolves to) within the
// timeout, given to each address in turn (resolving the name is the resolver's own wait): `berth
// restore` asking whether a peer of the backed-up replica still runs, where waiting longer is
// safer than answering "no" too soon.
bool accepts_connections(const std::string& address, std::chrono::milliseconds timeout);

}  // namespace berth::net
