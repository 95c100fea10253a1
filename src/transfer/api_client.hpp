#pragma once
// A registry's API as import and export speak it (net's one HTTP client underneath): the
// endpoint's origin, path prefix and Basic credentials on every request.
#include <string>

#include "berth/net/client.hpp"
#include "berth/transfer/transfer.hpp"
#include "files.hpp"

namespace berth::transfer {

class ApiClient {
public:
    explicit ApiClient(const Endpoint& endpoint);
    // A small request and its whole answer (bodies up to 64 MiB).
    net::Response request(const std::string& method, const std::string& path, net::Headers headers = {},
                          std::string body = {});
    // A request whose body is the file's bytes, streamed.
    net::Response send_file(const std::string& method, const std::string& target, net::Headers headers,
                            const FileRange& file, const std::function<void(std::size_t)>& sent);
    // An answer's body streamed to `sink` piece by piece (blobs); returns the status.
    int receive(const std::string& path, const std::function<void(const char*, std::size_t)>& sink,
                std::uint64_t& size);
    // path_prefix + path.
    std::string target(const std::string& path) const { return prefix_ + path; }
    // A Location a registry answered (absolute URL or path) as a path below the prefix.
    std::string location_path(const std::string& location) const;

private:
    net::Headers with_auth(net::Headers headers) const;
    net::Client client_;
    net::Origin origin_;
    std::string prefix_, authorization_;
};

// "what answered status: body" for errors.
std::string describe_answer(const std::string& what, const net::Response& response);

}  // namespace berth::transfer
