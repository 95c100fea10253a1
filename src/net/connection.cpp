#include "connection.hpp"

#include <openssl/ssl.h>
#include <sys/socket.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <cerrno>

#include "errors.hpp"

namespace berth::net {

using tcp = asio::ip::tcp;

namespace {

constexpr std::size_t read_buffer_size = 64 * 1024;
// What an answer may leave unparsed: a head (at most 64 KiB) and a read beyond it. A chunk-size
// line, chunk extension or trailer that never ends overflows this (an error) instead of growing
// the buffer for as long as the other side sends.
constexpr std::size_t max_buffered = 4 * read_buffer_size;

bool is_ip_address(const std::string& host) {
    boost::system::error_code ec;
    asio::ip::make_address(host, ec);
    return !ec;
}

}  // namespace

Connection::Connection(asio::io_context& io, std::shared_ptr<asio::ssl::context> tls, std::string pool_key)
    : strand_(asio::make_strand(io)), tls_context_(std::move(tls)), resolver_(strand_), buffer_(max_buffered),
      pool_key_(std::move(pool_key)) {
    if (tls_context_) tls_.emplace(strand_, *tls_context_);
    else plain_.emplace(strand_);
    // Beast reads as much as the buffer's free capacity, at least 512 bytes;
    // a body passes through without growing the buffer, so it starts large.
    buffer_.reserve(read_buffer_size);
}

void Connection::async_connect(const Origin& origin, std::chrono::milliseconds timeout,
                               std::function<void(std::exception_ptr)> done) {
    // The resolver has no timeout of its own: the deadline set after it
    // counts the time resolving took against the connect timeout.
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    const std::string what = "connect to " + origin.address.str();
    resolver_.async_resolve(
        origin.address.host, origin.address.port,
        [self = shared_from_this(), origin, deadline, what, done = std::move(done)](
            boost::system::error_code ec, tcp::resolver::results_type endpoints) mutable {
            if (ec)
                return done(make_error(Error::Kind::connect, "resolve " + origin.address.str() + ": " + ec.message()));
            self->tcp().expires_at(deadline);
            self->tcp().async_connect(endpoints, [self, origin, what, done = std::move(done)](
                                                     boost::system::error_code ec, const tcp::endpoint&) mutable {
                if (ec) return done(make_error(ec, what, Error::Kind::connect));
                self->tcp().socket().set_option(tcp::no_delay(true), ec);
                self->on_connected(origin, std::move(done));
            });
        });
}

void Connection::on_connected(const Origin& origin, std::function<void(std::exception_ptr)> done) {
    if (!tls_) {
        tcp().expires_never();
        return done(nullptr);
    }
    const auto& name = origin.tls.server_name.empty() ? origin.address.host : origin.tls.server_name;
    // RFC 6066 allows only host names in SNI, never addresses.
    if (!is_ip_address(name) && !SSL_set_tlsext_host_name(tls_->native_handle(), name.c_str()))
        return done(make_error(Error::Kind::tls, "TLS to " + origin.address.str() + ": cannot set the server name"));
    if (!origin.tls.insecure) tls_->set_verify_callback(asio::ssl::host_name_verification(name));
    // The handshake runs under the deadline async_connect set.
    tls_->async_handshake(asio::ssl::stream_base::client,
                          [self = shared_from_this(), what = "TLS handshake with " + origin.address.str(),
                           done = std::move(done)](boost::system::error_code ec) {
                              if (ec) return done(make_error(ec, what, Error::Kind::tls));
                              self->tcp().expires_never();
                              done(nullptr);
                          });
}

bool Connection::stale() {
    if (buffer_.size() != 0 || !tcp().socket().is_open()) return true;
    char byte;
    const auto n = ::recv(tcp().socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
}

void Connection::close() {
    boost::system::error_code ec;
    tcp().socket().shutdown(tcp::socket::shutdown_both, ec);
    tcp().close();
}

std::shared_ptr<asio::ssl::context> make_tls_context(const TlsOptions& options) {
    auto context = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
    boost::system::error_code ec;
    auto check = [&](const char* what, const std::string& file) {
        if (ec) throw Error(Error::Kind::tls, std::string(what) + " " + file + ": " + ec.message());
    };
    SSL_CTX_set_min_proto_version(context->native_handle(), TLS1_2_VERSION);
    if (options.insecure) {
        context->set_verify_mode(asio::ssl::verify_none);
    } else {
        context->set_verify_mode(asio::ssl::verify_peer);
        if (options.ca_file.empty()) context->set_default_verify_paths(ec);
        else context->load_verify_file(options.ca_file, ec);
        check("CA file", options.ca_file);
    }
    if (!options.cert_file.empty()) {
        context->use_certificate_chain_file(options.cert_file, ec);
        check("client certificate", options.cert_file);
        context->use_private_key_file(options.key_file.empty() ? options.cert_file : options.key_file,
                                      asio::ssl::context::pem, ec);
        check("client key", options.key_file);
    }
    return context;
}

}  // namespace berth::net
