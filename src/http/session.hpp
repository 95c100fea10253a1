#pragma once
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <memory>

namespace berth::http {

struct ServerContext;

// Serves one connection until it closes; keeps itself alive through its
// handlers. With tls, the connection starts with a TLS handshake.
void start_session(boost::asio::ip::tcp::socket socket, ServerContext& context,
                   std::shared_ptr<boost::asio::ssl::context> tls);

// Whether this kernel can encrypt TLS (kTLS: the `tls` module), probed once on
// a loopback connection. Where it can, sessions hand their send keys to it.
bool kernel_tls_available();

}  // namespace berth::http
