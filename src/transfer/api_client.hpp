#pragma once
// A registry's API as import and export speak it, through the one /v2/ client
// (remote/registry_client.hpp: Basic and token challenges, redirects, deadlines): the scope each
// request asks for, whole small answers, and blob bodies streamed both ways.
#include <functional>
#include <string>

#include "berth/net/client.hpp"
#include "berth/remote/registry_client.hpp"
#include "berth/transfer/transfer.hpp"
#include "files.hpp"

namespace berth::transfer {

// The token scopes of a read of repo, and of a push into it.
inline std::string pull_scope(const std::string& repo) { return "repository:" + repo + ":pull"; }
inline std::string push_scope(const std::string& repo) { return "repository:" + repo + ":pull,push"; }

class ApiClient {
public:
    explicit ApiClient(const Endpoint& endpoint);
    // A small request and its whole answer (bodies up to 64 MiB).
    net::Response request(const std::string& method, const std::string& path, const std::string& scope,
                          net::Headers headers = {}, const std::string& body = {});
    // A request whose body is the file's bytes, streamed.
    net::Response send_file(const std::string& method, const std::string& path, const std::string& scope,
                            net::Headers headers, const FileRange& file, const std::function<void(std::size_t)>& sent);
    // An answer's body streamed to `sink` piece by piece (blobs), after `size` is set from its
    // head; returns the status.
    int receive(const std::string& path, const std::string& scope,
                const std::function<void(const char*, std::size_t)>& sink, std::uint64_t& size);
    // A Location a registry answered as an API path.
    std::string location_path(const std::string& location) const { return registry_.path_of(location); }

private:
    net::Client client_;
    remote::RegistryClient registry_;
};

// "what answered status: body" for errors.
std::string describe_answer(const std::string& what, const net::Response& response);

}  // namespace berth::transfer
