#pragma once
// A blocking HTTP/1.1 client for the peer API, with a small pool of
// keep-alive connections. Used from replication and worker threads only.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "berth/oci/digest.hpp"

namespace berth::replication {

struct PeerResponse {
    int status = 0;
    std::map<std::string, std::string> headers;  // lower-case names
    std::string body;
    std::string header(const std::string& name) const;
};

class PeerClient {
public:
    PeerClient(std::string address, std::string secret);
    ~PeerClient();

    const std::string& address() const { return address_; }

    // Throws std::runtime_error when the peer cannot be reached or answers garbage.
    PeerResponse request(const std::string& method, const std::string& target, const std::string& body = {},
                         std::chrono::milliseconds timeout = std::chrono::seconds(10),
                         const std::vector<std::pair<std::string, std::string>>& headers = {});
    // Streams a 200 body into file while hashing it; returns the status. The
    // file holds exactly the body when the digest matched.
    int download(const std::string& target, const std::filesystem::path& file, oci::Hasher& hasher,
                 std::chrono::milliseconds idle_timeout = std::chrono::seconds(30));

private:
    struct Connection;
    std::unique_ptr<Connection> take(bool fresh = false);
    void give_back(std::unique_ptr<Connection> connection);

    std::string address_, host_, port_, secret_;
    std::mutex mutex_;
    std::vector<std::unique_ptr<Connection>> idle_;
};

}  // namespace berth::replication
