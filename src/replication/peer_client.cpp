#include "peer_client.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <stdexcept>

#include "berth/replication/protocol.hpp"

namespace berth::replication {

PeerClient::PeerClient(net::Client& client, const std::string& address, std::string secret)
    : client_(client), address_(address), origin_{net::parse_host_port(address), {}}, secret_(std::move(secret)) {}

net::RequestHead PeerClient::head(const std::string& method, const std::string& target) const {
    net::RequestHead head{method, target, {}, {}, false, {}};
    head.headers = {{protocol::header::secret, secret_}, {protocol::header::versions, protocol::versions_text()}};
    return head;
}

net::Response PeerClient::request(const std::string& method, const std::string& target, const std::string& body,
                                  std::chrono::milliseconds timeout, const net::Headers& headers) {
    auto request = head(method, target);
    request.headers.insert(request.headers.end(), headers.begin(), headers.end());
    request.header_timeout = timeout;
    request.has_body = method == "POST" || method == "PUT";
    return client_.request(origin_, std::move(request), body, 256 << 20);
}

int PeerClient::download(const std::string& target, const std::filesystem::path& file, oci::Hasher& hasher) {
    auto exchange = client_.open(origin_, head("GET", target));
    const int status = exchange->read_head().status;
    if (status != 200) return status;  // the connection is dropped: its body was not read

    int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw std::runtime_error("open " + file.string());
    std::vector<char> chunk(1 << 20);
    try {
        while (auto got = exchange->read_body(chunk)) {
            hasher.update(chunk.data(), got);
            for (std::size_t done = 0; done < got;) {
                auto n = ::write(fd, chunk.data() + done, got - done);
                if (n < 0 && errno == EINTR) continue;
                if (n < 0) throw std::runtime_error("write " + file.string());
                done += static_cast<std::size_t>(n);
            }
        }
    } catch (...) {
        ::close(fd);
        throw;
    }
    ::close(fd);
    return status;
}

}  // namespace berth::replication
