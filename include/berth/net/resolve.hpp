#pragma once
// Name resolution, blocking: for start-up checks and discovery threads.
#include <string>
#include <vector>

#include "berth/net/host_port.hpp"

namespace berth::net {

// Every address the name resolves to, as HOST:PORT with the numeric host
// ("10.0.0.7:5000", "[fd00::7]:5000"); empty when it does not resolve.
std::vector<HostPort> resolve(const HostPort& name);

}  // namespace berth::net
