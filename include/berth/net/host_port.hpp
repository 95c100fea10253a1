#pragma once
// The one parser of HOST:PORT addresses and of upstream URLs in berth.
#include <string>
#include <string_view>

namespace berth::net {

struct HostPort {
    std::string host;  // without brackets, also for IPv6
    std::string port;  // decimal digits, 1..65535

    std::string str() const;  // "host:port", "[v6]:port"
    bool operator==(const HostPort&) const = default;
};

// Accepts "host:port", "[v6addr]:port", and "host" or "[v6addr]" when
// default_port is given. A bare IPv6 address ("::1:80") is ambiguous and
// rejected. Throws std::invalid_argument naming the problem.
HostPort parse_host_port(std::string_view text, std::string_view default_port = {});
// An address to listen on: HOST:PORT as above, ":PORT" for every IPv4 interface, and port 0
// for one the kernel picks.
HostPort parse_listen_address(std::string_view text);

// A Host header fit to go into a URL berth hands out (a token realm): host[:port]
// characters only, at most 255.
bool plain_host(std::string_view host);

struct Url {
    bool tls = false;
    HostPort address;
    std::string path_prefix;  // "" or "/a/b", never with a trailing '/'
};

// "http://host[:port][/prefix]" or "https://..."; the port defaults to 80 or
// 443. User info, queries and fragments are rejected. Throws std::invalid_argument.
Url parse_url(std::string_view url);

// A query parameter's value, percent-encoded (RFC 3986; '/' and ':' kept, as
// scopes and repository names read better so and mean the same).
std::string query_escape(std::string_view value);

}  // namespace berth::net
