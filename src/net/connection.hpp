#pragma once
// One client connection, plain or TLS, and everything done on it runs on its strand.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "berth/net/client.hpp"

namespace berth::net {

namespace asio = boost::asio;
namespace beast = boost::beast;

using Strand = asio::strand<asio::io_context::executor_type>;

class Connection : public std::enable_shared_from_this<Connection> {
public:
    // `tls` is null for plain connections.
    Connection(asio::io_context& io, std::shared_ptr<asio::ssl::context> tls, std::string pool_key);

    const Strand& strand() const { return strand_; }
    const std::string& pool_key() const { return pool_key_; }
    beast::tcp_stream& tcp() { return tls_ ? tls_->next_layer() : *plain_; }
    beast::flat_buffer& buffer() { return buffer_; }
    bool reused() const { return reused_; }
    void mark_reused() { reused_ = true; }

    // Calls f with the stream HTTP runs over, whichever type it is.
    template <typename F>
    decltype(auto) visit(F&& f) {
        if (tls_) return f(*tls_);
        return f(*plain_);
    }

    // Resolves, connects and handshakes within `timeout`; on the strand.
    void async_connect(const Origin& origin, std::chrono::milliseconds timeout,
                       std::function<void(std::exception_ptr)> done);

    // Whether an idle connection can no longer carry a request: the peer
    // closed it, or sent something unasked. Only while no operation is pending.
    bool stale();

    // On the strand, or while no operation can be pending.
    void close();

private:
    void on_connected(const Origin& origin, std::function<void(std::exception_ptr)> done);

    Strand strand_;
    std::shared_ptr<asio::ssl::context> tls_context_;  // outlives the stream using it
    std::optional<beast::tcp_stream> plain_;
    std::optional<asio::ssl::stream<beast::tcp_stream>> tls_;
    asio::ip::tcp::resolver resolver_;
    beast::flat_buffer buffer_;
    std::string pool_key_;
    bool reused_ = false;
};

// The client SSL context for one TLS identity (CA, verification, client certificate).
std::shared_ptr<asio::ssl::context> make_tls_context(const TlsOptions& options);

}  // namespace berth::net
