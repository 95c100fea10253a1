#include "peer_client.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <stdexcept>

namespace berth::replication {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr const char* secret_header = "Berth-Peer-Secret";

template <typename Fields>
std::map<std::string, std::string> headers_of(const Fields& fields) {
    std::map<std::string, std::string> out;
    for (auto& field : fields) {
        std::string name(field.name_string());
        for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        out[name] = std::string(field.value());
    }
    return out;
}

}  // namespace

std::string PeerResponse::header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
}

// Synchronous operations on a tcp_stream still honour its expiry, because
// Beast implements them as async operations run to completion on a private io_context.
struct PeerClient::Connection {
    asio::io_context io;
    beast::tcp_stream stream{io};
    beast::flat_buffer buffer;

    template <typename Op>
    void run(Op op, std::chrono::milliseconds timeout) {
        beast::error_code result = asio::error::would_block;
        stream.expires_after(timeout);
        op(result);
        io.restart();
        io.run();
        if (result) throw std::runtime_error(result.message());
    }
};

PeerClient::PeerClient(std::string address, std::string secret) : address_(std::move(address)), secret_(std::move(secret)) {
    auto colon = address_.rfind(':');
    if (colon == std::string::npos) throw std::invalid_argument("peer address must be HOST:PORT: " + address_);
    host_ = address_.substr(0, colon);
    port_ = address_.substr(colon + 1);
    if (host_.size() > 2 && host_.front() == '[') host_ = host_.substr(1, host_.size() - 2);
}

PeerClient::~PeerClient() = default;

std::unique_ptr<PeerClient::Connection> PeerClient::take(bool fresh) {
    if (!fresh) {
        std::lock_guard lock(mutex_);
        if (!idle_.empty()) {
            auto connection = std::move(idle_.back());
            idle_.pop_back();
            return connection;
        }
    }
    auto connection = std::make_unique<Connection>();
    tcp::resolver resolver(connection->io);
    beast::error_code ec;
    auto endpoints = resolver.resolve(host_, port_, ec);
    if (ec) throw std::runtime_error("resolve " + address_ + ": " + ec.message());
    connection->run(
        [&](beast::error_code& result) {
            connection->stream.async_connect(endpoints, [&](beast::error_code e, const tcp::endpoint&) { result = e; });
        },
        std::chrono::seconds(2));
    connection->stream.socket().set_option(tcp::no_delay(true), ec);
    return connection;
}

void PeerClient::give_back(std::unique_ptr<Connection> connection) {
    std::lock_guard lock(mutex_);
    if (idle_.size() < 8) idle_.push_back(std::move(connection));
}

PeerResponse PeerClient::request(const std::string& method, const std::string& target, const std::string& body,
                                 std::chrono::milliseconds timeout,
                                 const std::vector<std::pair<std::string, std::string>>& headers) {
    // A pooled connection may have been closed by the peer; one retry on a
    // new connection covers that (another pooled one may be just as stale).
    for (int attempt = 0;; ++attempt) {
        auto connection = take(attempt > 0);
        try {
            bhttp::request<bhttp::string_body> req(bhttp::string_to_verb(method), target, 11);
            req.set(bhttp::field::host, address_);
            req.set(secret_header, secret_);
            for (auto& [name, value] : headers) req.set(name, value);
            req.body() = body;
            req.prepare_payload();
            connection->run([&](beast::error_code& result) {
                bhttp::async_write(connection->stream, req, [&](beast::error_code e, std::size_t) { result = e; });
            }, timeout);
            bhttp::response_parser<bhttp::string_body> parser;
            parser.body_limit(256ull << 20);
            if (method == "HEAD") parser.skip(true);
            connection->run([&](beast::error_code& result) {
                bhttp::async_read(connection->stream, connection->buffer, parser,
                                  [&](beast::error_code e, std::size_t) { result = e; });
            }, timeout);
            auto& res = parser.get();
            PeerResponse out{static_cast<int>(res.result_int()), headers_of(res), std::move(res.body())};
            if (res.keep_alive()) give_back(std::move(connection));
            return out;
        } catch (const std::exception&) {
            if (attempt > 0) throw;
        }
    }
}

int PeerClient::download(const std::string& target, const std::filesystem::path& file, oci::Hasher& hasher,
                         std::chrono::milliseconds idle_timeout) {
    auto connection = take();
    bhttp::request<bhttp::empty_body> req(bhttp::verb::get, target, 11);
    req.set(bhttp::field::host, address_);
    req.set(secret_header, secret_);
    connection->run([&](beast::error_code& result) {
        bhttp::async_write(connection->stream, req, [&](beast::error_code e, std::size_t) { result = e; });
    }, idle_timeout);
    bhttp::response_parser<bhttp::buffer_body> parser;
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    connection->run([&](beast::error_code& result) {
        bhttp::async_read_header(connection->stream, connection->buffer, parser,
                                 [&](beast::error_code e, std::size_t) { result = e; });
    }, idle_timeout);
    const int status = static_cast<int>(parser.get().result_int());
    if (status != 200) return status;  // the connection is dropped: its body was not read

    int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw std::runtime_error("open " + file.string());
    std::vector<char> chunk(1 << 20);
    try {
        while (!parser.is_done()) {
            parser.get().body().data = chunk.data();
            parser.get().body().size = chunk.size();
            connection->run([&](beast::error_code& result) {
                bhttp::async_read(connection->stream, connection->buffer, parser, [&](beast::error_code e, std::size_t) {
                    result = e == bhttp::error::need_buffer ? beast::error_code{} : e;
                });
            }, idle_timeout);
            const std::size_t got = chunk.size() - parser.get().body().size;
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
    if (parser.get().keep_alive()) give_back(std::move(connection));
    return status;
}

}  // namespace berth::replication
