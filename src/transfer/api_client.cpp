// The registry API client of import and export (api_client.hpp).
#include "api_client.hpp"

#include <unistd.h>

#include <stdexcept>
#include <vector>

#include "berth/net/host_port.hpp"
#include "berth/oci/encoding.hpp"

namespace berth::transfer {

ApiClient::ApiClient(const Endpoint& endpoint) {
    auto url = net::parse_url(endpoint.url);
    origin_.address = url.address;
    origin_.tls.enabled = url.tls;
    origin_.tls.ca_file = endpoint.ca_file;
    prefix_ = url.path_prefix;
    if (!endpoint.username.empty())
        authorization_ = "Basic " + oci::base64(endpoint.username + ":" + endpoint.password);
}

net::Headers ApiClient::with_auth(net::Headers headers) const {
    if (!authorization_.empty()) headers.emplace_back("Authorization", authorization_);
    return headers;
}

net::Response ApiClient::request(const std::string& method, const std::string& path, net::Headers headers,
                                 std::string body) {
    net::RequestHead head{method,       target(path),  with_auth(std::move(headers)),
                          std::nullopt, !body.empty(), std::nullopt};
    return client_.request(origin_, std::move(head), std::move(body));
}

net::Response ApiClient::send_file(const std::string& method, const std::string& full_target, net::Headers headers,
                                   const FileRange& file, const std::function<void(std::size_t)>& sent) {
    net::RequestHead head{method, full_target, with_auth(std::move(headers)), file.size, true, std::nullopt};
    auto exchange = client_.open(origin_, std::move(head));
    read_pieces(file, [&](const char* data, std::size_t n) {
        exchange->write({data, n});
        sent(n);
    });
    exchange->end_request();
    std::vector<char> buffer(64 << 10);
    net::Response response;
    static_cast<net::ResponseHead&>(response) = exchange->read_head();
    for (std::size_t n; (n = exchange->read_body(buffer)) > 0 && response.body.size() < 65536;)
        response.body.append(buffer.data(), n);
    return response;
}

int ApiClient::receive(const std::string& path, const std::function<void(const char*, std::size_t)>& sink,
                       std::uint64_t& size) {
    net::RequestHead head{"GET", target(path), with_auth({}), std::nullopt, false, std::nullopt};
    auto exchange = client_.open(origin_, std::move(head));
    const auto& answer = exchange->read_head();
    const int status = answer.status;
    size = answer.content_length.value_or(0);
    std::vector<char> buffer(1 << 20);
    for (std::size_t n; (n = exchange->read_body(buffer)) > 0;)
        if (status == 200) sink(buffer.data(), n);
    return status;
}

std::string ApiClient::location_path(const std::string& location) const {
    // http[s]://host[:port]/path?query -> /path?query, then without the prefix
    auto path = location;
    if (auto scheme = location.find("://"); scheme != std::string::npos) {
        auto slash = location.find('/', scheme + 3);
        path = slash == std::string::npos ? "/" : location.substr(slash);
    }
    if (!prefix_.empty() && path.starts_with(prefix_ + "/")) path = path.substr(prefix_.size());
    return path;
}

std::string describe_answer(const std::string& what, const net::Response& response) {
    return what + " answered " + std::to_string(response.status) + ": " + response.body.substr(0, 300);
}

}  // namespace berth::transfer
