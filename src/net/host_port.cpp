#include "berth/net/host_port.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace berth::net {
namespace {

[[noreturn]] void fail(std::string_view text, std::string_view why) {
    throw std::invalid_argument("invalid address \"" + std::string(text) + "\": " + std::string(why));
}

void check_port(std::string_view text, std::string_view port, int lowest) {
    const auto range = "port must be a number from " + std::to_string(lowest) + " to 65535";
    if (port.empty()) fail(text, "missing port");
    if (port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
        fail(text, range);
    const int value = std::stoi(std::string(port));
    if (value < lowest || value > 65535) fail(text, range);
}

bool valid_host_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_'; }

}  // namespace

std::string HostPort::str() const {
    return host.find(':') == std::string::npos ? host + ":" + port : "[" + host + "]:" + port;
}

namespace {

HostPort parse(std::string_view text, std::string_view default_port, int lowest_port) {
    HostPort out;
    std::string_view port;
    if (!text.empty() && text.front() == '[') {
        const auto close = text.find(']');
        if (close == std::string_view::npos) fail(text, "missing ']'");
        out.host = std::string(text.substr(1, close - 1));
        if (out.host.empty() ||
            !std::all_of(out.host.begin(), out.host.end(),
                         [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.'; }) ||
            out.host.find(':') == std::string::npos)
            fail(text, "not an IPv6 address between brackets");
        const auto rest = text.substr(close + 1);
        if (rest.empty()) port = default_port;
        else if (rest.front() == ':') port = rest.substr(1);
        else fail(text, "unexpected characters after ']'");
        if (rest == ":") fail(text, "missing port");
    } else {
        const auto colon = text.find(':');
        if (colon != std::string_view::npos && text.find(':', colon + 1) != std::string_view::npos)
            fail(text, "an IPv6 address needs brackets, as in [::1]:5000");
        out.host = std::string(text.substr(0, colon));
        if (colon == std::string_view::npos) {
            if (default_port.empty()) fail(text, "expected HOST:PORT");
            port = default_port;
        } else {
            port = text.substr(colon + 1);
        }
        if (out.host.empty()) fail(text, "missing host");
        if (!std::all_of(out.host.begin(), out.host.end(), valid_host_char)) fail(text, "invalid character in host");
    }
    check_port(text, port, lowest_port);
    out.port = std::string(port);
    return out;
}

}  // namespace

HostPort parse_host_port(std::string_view text, std::string_view default_port) { return parse(text, default_port, 1); }

HostPort parse_listen_address(std::string_view text) {
    if (text.starts_with(':')) return parse("0.0.0.0" + std::string(text), {}, 0);
    return parse(text, {}, 0);
}

Url parse_url(std::string_view url) {
    Url out;
    std::string_view rest;
    auto scheme_is = [&](std::string_view scheme) {
        return url.size() >= scheme.size() && std::equal(scheme.begin(), scheme.end(), url.begin(), [](char a, char b) {
                   return a == std::tolower(static_cast<unsigned char>(b));
               });
    };
    if (scheme_is("https://")) {
        out.tls = true;
        rest = url.substr(8);
    } else if (scheme_is("http://")) {
        rest = url.substr(7);
    } else {
        throw std::invalid_argument("invalid URL \"" + std::string(url) + "\": expected http:// or https://");
    }
    if (rest.find_first_of("?#") != std::string_view::npos)
        throw std::invalid_argument("invalid URL \"" + std::string(url) + "\": query and fragment are not supported");
    const auto slash = rest.find('/');
    const auto authority = rest.substr(0, slash);
    if (authority.find('@') != std::string_view::npos)
        throw std::invalid_argument("invalid URL \"" + std::string(url) + "\": credentials do not belong in the URL");
    out.address = parse_host_port(authority, out.tls ? "443" : "80");
    if (slash != std::string_view::npos) {
        auto path = rest.substr(slash);
        while (!path.empty() && path.back() == '/') path.remove_suffix(1);
        out.path_prefix = std::string(path);
    }
    return out;
}

// It goes into a realm URL a client will call with its password.
bool plain_host(std::string_view host) {
    if (host.empty() || host.size() > 255) return false;
    for (char c : host)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' || c == '[' || c == ']'))
            return false;
    return true;
}

std::string query_escape(std::string_view value) {
    static constexpr char digits[] = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : value) {
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
            c == '_' || c == '~' || c == '/' || c == ':') {
            out += static_cast<char>(c);
        } else {
            out += '%';
            out += digits[c >> 4];
            out += digits[c & 15];
        }
    }
    return out;
}

}  // namespace berth::net
