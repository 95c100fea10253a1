// The registry API client of import and export (api_client.hpp).
#include "api_client.hpp"

#include <vector>

namespace berth::transfer {
namespace {

constexpr std::size_t max_answer_bytes = 64 << 20;
constexpr std::uint64_t min_bytes_per_second = 1 << 20;

remote::Config config_of(const Endpoint& endpoint) {
    remote::Config config;
    config.urls = {net::parse_url(endpoint.url)};
    config.tls.ca_file = endpoint.ca_file;
    config.username = endpoint.username;
    config.password = endpoint.password;
    // The credentials go to a token realm on the registry's own origin unless --token-realm names another.
    config.token_realms = endpoint.token_realms;
    if (config.token_realms.empty()) {
        const auto& url = config.urls.front();
        config.token_realms = {std::string(url.tls ? "https://" : "http://") + url.address.str() + "/"};
    }
    config.max_concurrent = 64;  // the commands' own --parallel bounds them
    // A whole blob goes in one request, and its answer comes once the registry has hashed and
    // stored it: an import waits as long as that takes, not an upstream's fetch deadline.
    config.fetch_timeout = std::chrono::hours(6);
    config.answer_timeout = std::chrono::minutes(10);
    return config;
}

}  // namespace

ApiClient::ApiClient(const Endpoint& endpoint) : registry_(client_, config_of(endpoint)) {}

net::Response ApiClient::request(const std::string& method, const std::string& path, const std::string& scope,
                                 net::Headers headers, const std::string& body) {
    if (method != "GET" && method != "HEAD") {
        const remote::Body sent{body.size(), [&](net::Exchange& exchange) {
                                    if (!body.empty()) exchange.write(body);
                                }};
        return registry_.request(method, path, scope, max_answer_bytes, headers, &sent);
    }
    return registry_.request(method, path, scope, max_answer_bytes, headers);
}

net::Response ApiClient::send_file(const std::string& method, const std::string& path, const std::string& scope,
                                   net::Headers headers, const FileRange& file,
                                   const std::function<void(std::size_t)>& sent) {
    const remote::Body body{file.size, [&](net::Exchange& exchange) {
                                read_pieces(file, [&](const char* data, std::size_t n) {
                                    exchange.write({data, n});
                                    sent(n);
                                });
                            }};
    auto opened = registry_.open(method, path, scope, headers, registry_.deadline(), &body);
    net::Response response;
    static_cast<net::ResponseHead&>(response) = *opened.head;
    std::vector<char> buffer(64 << 10);
    for (std::size_t n; (n = opened.exchange->read_body(buffer)) > 0 && response.body.size() < 65536;)
        response.body.append(buffer.data(), n);
    return response;
}

int ApiClient::receive(const std::string& path, const std::string& scope,
                       const std::function<void(const char*, std::size_t)>& sink, std::uint64_t& size) {
    auto opened = registry_.open("GET", path, scope, {}, registry_.deadline());
    const int status = opened.head->status;
    size = opened.head->content_length.value_or(0);
    // A body that trickles is given up on: a minute, and then as long as 1 MiB/s needs for its size.
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::minutes(1) + std::chrono::seconds(size / min_bytes_per_second);
    std::vector<char> buffer(1 << 20);
    for (std::size_t n; (n = opened.exchange->read_body(buffer)) > 0;) {
        if (status == 200) sink(buffer.data(), n);
        if (std::chrono::steady_clock::now() > deadline)
            throw net::Error(net::Error::Kind::timeout, "GET " + path + " sent its body too slowly");
    }
    return status;
}

std::string describe_answer(const std::string& what, const net::Response& response) {
    return what + " answered " + std::to_string(response.status) + ": " + response.body.substr(0, 300);
}

}  // namespace berth::transfer
