// --url: scheme, host (name, IPv4 or [IPv6]) and port, resolved with getaddrinfo.
#include "endpoint.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <cstring>
#include <stdexcept>

namespace berth::bench {

Endpoint parse_url(const std::string& url) {
    Endpoint ep;
    std::string rest = url;
    if (rest.rfind("http://", 0) == 0) {
        rest = rest.substr(7);
    } else if (rest.rfind("https://", 0) == 0) {
        rest = rest.substr(8);
        ep.tls = true;
        ep.port = 443;
    } else if (rest.find("://") != std::string::npos) {
        throw std::invalid_argument("only http:// and https:// URLs are supported");
    }
    auto slash = rest.find('/');
    if (slash != std::string::npos) rest = rest.substr(0, slash);
    ep.host_header = rest;
    auto colon = rest.rfind(':');
    if (colon != std::string::npos && rest.find(']') == std::string::npos) {
        ep.host = rest.substr(0, colon);
        ep.port = std::stoi(rest.substr(colon + 1));
    } else if (colon != std::string::npos && rest.back() != ']') {
        ep.host = rest.substr(1, rest.rfind(']') - 1);
        ep.port = std::stoi(rest.substr(colon + 1));
    } else {
        ep.host = rest;
    }
    addrinfo hints{}, *res = nullptr;
    hints.ai_socktype = SOCK_STREAM;
    std::string port = std::to_string(ep.port);
    if (getaddrinfo(ep.host.c_str(), port.c_str(), &hints, &res) != 0 || !res)
        throw std::invalid_argument("cannot resolve " + ep.host);
    std::memcpy(&ep.addr, res->ai_addr, res->ai_addrlen);
    ep.addr_len = res->ai_addrlen;
    freeaddrinfo(res);
    unsigned char raw[sizeof(in6_addr)];
    ep.host_is_address =
        inet_pton(AF_INET, ep.host.c_str(), raw) == 1 || inet_pton(AF_INET6, ep.host.c_str(), raw) == 1;
    return ep;
}

}  // namespace berth::bench
