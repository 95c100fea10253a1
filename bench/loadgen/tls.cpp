// The TLS client context (verification, suites, session resumption) and OpenSSL's error text.
#include "tls.hpp"

#include <openssl/err.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "http_client.hpp"

namespace berth::bench {

std::string tls_errors() {
    std::string out;
    char text[256];
    for (unsigned long e; (e = ERR_get_error()) != 0;) {
        ERR_error_string_n(e, text, sizeof text);
        out += ": ";
        out += text;
    }
    return out;
}

std::string tls_failure(SSL* ssl, int ret, const char* what) {
    const int saved_errno = errno;
    std::string out = what;
    switch (SSL_get_error(ssl, ret)) {
        case SSL_ERROR_WANT_READ:
        case SSL_ERROR_WANT_WRITE: out += ": timed out"; break;  // SO_RCVTIMEO/SO_SNDTIMEO on a blocking socket
        case SSL_ERROR_SYSCALL:
            out += std::string(": ") + (saved_errno ? std::strerror(saved_errno) : "connection closed");
            break;
        case SSL_ERROR_ZERO_RETURN: out += ": connection closed"; break;
        default: break;
    }
    return out + tls_errors();
}

TlsContext make_tls_context(const Endpoint& ep, const Options& o) {
    TlsContext owner(nullptr, SSL_CTX_free);
    if (!ep.tls) return owner;
    owner.reset(SSL_CTX_new(TLS_client_method()));
    SSL_CTX* ctx = owner.get();
    if (!ctx) throw std::runtime_error("SSL_CTX_new" + tls_errors());
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    // A server closing without close_notify ends a body like one sending it; what a
    // cut-off body lacks shows in the byte counts.
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
    // Up to 256 KiB of records per recv instead of two recvs (header, rest) per
    // 16 KiB record: the generator shares the cores with the server.
    SSL_CTX_set_read_ahead(ctx, 1);
    SSL_CTX_set_default_read_buffer_len(ctx, 256 * 1024);
    if (o.insecure) {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
    } else {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
        int ok = o.cacert.empty() ? SSL_CTX_set_default_verify_paths(ctx)
                                  : SSL_CTX_load_verify_locations(ctx, o.cacert.c_str(), nullptr);
        if (ok != 1) throw std::invalid_argument("cannot load CA certificates " + o.cacert + tls_errors());
    }
    if (!o.ciphersuites.empty() && SSL_CTX_set_ciphersuites(ctx, o.ciphersuites.c_str()) != 1)
        throw std::invalid_argument("bad --tls-ciphersuites " + o.ciphersuites + tls_errors());
    if (o.resume) {
        // No shared cache: each connection keeps what it received (Conn::keep_session),
        // so a client resumes its own previous connection's session.
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
        SSL_CTX_sess_set_new_cb(ctx, Conn::keep_session);
    }
    return owner;
}

}  // namespace berth::bench
