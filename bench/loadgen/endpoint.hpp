#pragma once
// Where the registry under test listens: the scheme, host and port of --url, resolved once.
#include <sys/socket.h>

#include <string>

namespace berth::bench {

struct Endpoint {
    bool tls = false;
    std::string host;
    int port = 80;
    std::string host_header;
    bool host_is_address = false;  // an IPv4/IPv6 literal: no SNI, the certificate must name the address
    sockaddr_storage addr{};
    socklen_t addr_len = 0;
};

// http:// or https:// URL (its path is ignored); throws std::invalid_argument.
Endpoint parse_url(const std::string& url);

}  // namespace berth::bench
