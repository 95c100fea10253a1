#pragma once
// One peer's end of the peer protocol: requests carry the shared secret and
// this build's protocol versions, and go over berth's HTTP client. Blocking:
// for replication and worker threads only.
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "berth/net/client.hpp"
#include "berth/oci/digest.hpp"
#include "berth/storage/blob_writer.hpp"

namespace berth::replication {

class PeerClient {
public:
    // address: HOST:PORT; throws std::invalid_argument otherwise.
    // self_id goes with every request, so the peer knows whose cursor it is serving.
    PeerClient(net::Client& client, const std::string& address, const net::TlsOptions& tls, std::string secret,
               std::string self_id);

    const std::string& address() const { return address_; }

    // Throws net::Error when the peer cannot be reached or answers garbage.
    net::Response request(const std::string& method, const std::string& target, const std::string& body = {},
                          std::chrono::milliseconds timeout = std::chrono::seconds(10),
                          const net::Headers& headers = {});
    // The same without a waiting thread; `done` runs on the client's I/O thread and must not block.
    void async_request(const std::string& method, const std::string& target, std::string body,
                       std::chrono::milliseconds timeout, const net::Headers& headers, net::Client::ResponseDone done);
    // A request whose answer (and body, with head.has_body) goes through the exchange: what
    // another layer sends a peer (a forwarded upload, a fetch's owner), the peer headers added.
    std::unique_ptr<net::Exchange> open(net::RequestHead head);
    net::Response ask(net::RequestHead head, std::size_t limit);
    // Streams a 200 body into the writer (which hashes it); returns the status.
    int download(const std::string& target, storage::BlobWriter& into);

private:
    net::RequestHead head(const std::string& method, const std::string& target, std::chrono::milliseconds timeout,
                          const net::Headers& headers = {}) const;
    void authenticate(net::RequestHead& head) const;

    net::Client& client_;
    std::string address_;
    net::Origin origin_;
    std::string secret_;
    std::string self_id_;
};

}  // namespace berth::replication
