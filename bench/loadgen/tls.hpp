#pragma once
// OpenSSL for https:// URLs: the client context every connection is made from, and the
// text of what failed.
#include <openssl/ssl.h>

#include <memory>
#include <string>

#include "endpoint.hpp"
#include "options.hpp"

namespace berth::bench {

using TlsContext = std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)>;

// The client context every https:// connection is made from; null for http://.
TlsContext make_tls_context(const Endpoint& ep, const Options& o);

// What the error queue says, drained (SSL_get_error would take a stale entry for a new failure).
std::string tls_errors();

// Why an OpenSSL I/O call on `ssl` that returned `ret` failed.
std::string tls_failure(SSL* ssl, int ret, const char* what);

}  // namespace berth::bench
