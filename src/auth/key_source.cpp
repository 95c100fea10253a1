#include "key_source.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "berth/net/host_port.hpp"
#include "issuer_documents.hpp"

namespace berth::auth {
std::string read_bounded_file(const std::string& file, std::size_t limit) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + file);
    std::string text(limit + 1, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<std::size_t>(in.gcount()));
    if (text.size() > limit) throw std::runtime_error(file + " is larger than " + std::to_string(limit) + " bytes");
    return text;
}

namespace {

// A token file rotates (kubelet rewrites projected tokens): read it for every request.
std::string bearer_of(const OidcIssuer& issuer) {
    if (issuer.bearer_token_file.empty()) return {};
    auto token = read_bounded_file(issuer.bearer_token_file, 16 << 10);
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) token.pop_back();
    return token;
}

std::string get(net::Client& client, const OidcIssuer& issuer, const std::string& url, std::size_t limit) {
    net::Url parsed;
    try {
        parsed = net::parse_url(url);
    } catch (const std::invalid_argument& error) {
        throw std::runtime_error(url + ": " + error.what());
    }
    net::Origin origin{parsed.address, {}};
    origin.tls.enabled = parsed.tls;
    origin.tls.ca_file = issuer.ca_file;
    net::RequestHead head;
    head.method = "GET";
    head.target = parsed.path_prefix.empty() ? "/" : parsed.path_prefix;
    head.headers = {{"Accept", "application/json"}};
    if (auto token = bearer_of(issuer); !token.empty()) head.headers.push_back({"Authorization", "Bearer " + token});
    net::Response response;
    try {
        response = client.request(origin, std::move(head), {}, limit);
    } catch (const std::exception& error) {
        throw std::runtime_error(url + ": " + error.what());
    }
    if (response.status != 200) throw std::runtime_error(url + " answered " + std::to_string(response.status));
    return std::move(response.body);
}

}  // namespace

std::string key_set_text(const OidcIssuer& issuer, net::Client* client) {
    if (!issuer.jwks_file.empty()) return read_bounded_file(issuer.jwks_file, max_key_set_bytes);
    if (!client) throw std::logic_error("a discovery issuer without a client");
    auto document = get(*client, issuer, issuer.discovery_url, max_discovery_bytes);
    return get(*client, issuer, jwks_uri_of(document, issuer.issuer, issuer.discovery_url), max_key_set_bytes);
}

}  // namespace berth::auth
