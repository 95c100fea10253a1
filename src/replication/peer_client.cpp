#include "peer_client.hpp"

#include <stdexcept>

#include "berth/replication/protocol.hpp"

namespace berth::replication {

PeerClient::PeerClient(net::Client& client, const std::string& address, const net::TlsOptions& tls, std::string secret,
                       std::string self_id)
    : client_(client), address_(address), origin_{net::parse_host_port(address), tls}, secret_(std::move(secret)),
      self_id_(std::move(self_id)) {}

namespace {

constexpr std::size_t max_answer_bytes = 64 << 20;  // a page of state is about 4 MiB

}  // namespace

void PeerClient::authenticate(net::RequestHead& head) const {
    head.headers.insert(head.headers.begin(), {{protocol::header::secret, secret_},
                                               {protocol::header::versions, protocol::versions_text()},
                                               {protocol::header::replica, self_id_}});
}

net::RequestHead PeerClient::head(const std::string& method, const std::string& target,
                                  std::chrono::milliseconds timeout, const net::Headers& headers) const {
    net::RequestHead head{method, target, headers, {}, method == "POST" || method == "PUT", timeout};
    authenticate(head);
    return head;
}

std::unique_ptr<net::Exchange> PeerClient::open(net::RequestHead head) {
    authenticate(head);
    return client_.open(origin_, std::move(head));
}

net::Response PeerClient::ask(net::RequestHead head, std::size_t limit) {
    authenticate(head);
    return client_.request(origin_, std::move(head), {}, limit);
}

net::Response PeerClient::request(const std::string& method, const std::string& target, const std::string& body,
                                  std::chrono::milliseconds timeout, const net::Headers& headers) {
    return client_.request(origin_, head(method, target, timeout, headers), body, max_answer_bytes);
}

void PeerClient::async_request(const std::string& method, const std::string& target, std::string body,
                               std::chrono::milliseconds timeout, const net::Headers& headers,
                               net::Client::ResponseDone done) {
    client_.async_request(origin_, head(method, target, timeout, headers), std::move(body), max_answer_bytes,
                          std::move(done));
}

int PeerClient::download(const std::string& target, storage::BlobWriter& into) {
    // The header timeout is the client's; a body that stops arriving fails at its idle timeout.
    auto exchange = client_.open(origin_, head("GET", target, std::chrono::seconds(30)));
    const int status = exchange->read_head().status;
    if (status != 200) return status;  // the connection is dropped: its body was not read
    std::vector<char> chunk(1 << 20);
    while (auto got = exchange->read_body(chunk)) into.write(chunk.data(), got);
    return status;
}

}  // namespace berth::replication
