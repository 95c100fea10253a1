#pragma once
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>

namespace berth::http {

struct ServerContext;

// Serves one connection until it closes; keeps itself alive through its
// handlers. With tls, the connection starts with a TLS handshake.
void start_session(boost::asio::ip::tcp::socket socket, ServerContext& context,
                   std::shared_ptr<boost::asio::ssl::context> tls);

// Whether this kernel can encrypt TLS (kTLS): its `tls` module is loaded and took an AES-GCM key
// on a loopback connection, tried once (kernel_tls.cpp). Where it can, sessions hand their send
// keys to it.
bool kernel_tls_available();

// OpenSSL's key log callback, set on contexts whose connections berth may
// seal (TlsStream): it passes a connection's new send secret after a
// KeyUpdate to its sealer. No secret is logged or kept otherwise.
void tls_key_logged(const SSL* ssl, const char* line);

// What the log says encrypts a TLS connection's sending, from the options and the kernel.
std::string tls_sending_said(bool kernel_tls, bool berth_records);

}  // namespace berth::http
