// Conn: connecting (with the TLS handshake), closing, and one request-response exchange.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "http_client.hpp"
#include "tls.hpp"

namespace berth::bench {

Conn::~Conn() {
    close();
    if (session_) SSL_SESSION_free(session_);
}

void Conn::close() {
    if (ssl_) SSL_free(ssl_);
    ssl_ = nullptr;
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    buf_.clear();
    pos_ = 0;
}

void Conn::end() {
    if (ssl_ && SSL_shutdown(ssl_) < 0) ERR_clear_error();
    close();
}

int Conn::keep_session(SSL* ssl, SSL_SESSION* session) {
    auto* self = static_cast<Conn*>(SSL_get_app_data(ssl));
    if (self->session_) SSL_SESSION_free(self->session_);
    self->session_ = session;
    return 1;  // the reference is ours now
}

void Conn::connect() {
    close();
    fd_ = ::socket(ep_.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw NetError(Failure::connection, std::string("socket: ") + std::strerror(errno));
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    timeval tv{};
    tv.tv_sec = static_cast<long>(timeout_);
    tv.tv_usec = static_cast<long>((timeout_ - tv.tv_sec) * 1e6);
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (::connect(fd_, reinterpret_cast<const sockaddr*>(&ep_.addr), ep_.addr_len) != 0) {
        int e = errno;
        close();
        throw NetError(Failure::connection, std::string("connect: ") + std::strerror(e));
    }
    ++stats.connections;
    if (tls_) handshake();
}

void Conn::handshake() {
    ssl_ = SSL_new(tls_);
    if (!ssl_ || SSL_set_fd(ssl_, fd_) != 1) {
        close();
        throw NetError(Failure::connection, "TLS setup" + tls_errors());
    }
    SSL_set_app_data(ssl_, this);
    // SNI carries host names only (RFC 6066); the certificate check takes an
    // address too (OpenSSL 3's SSL_set1_host reads an address literal as one).
    if (!ep_.host_is_address) SSL_set_tlsext_host_name(ssl_, ep_.host.c_str());
    if (SSL_get_verify_mode(ssl_) != SSL_VERIFY_NONE) SSL_set1_host(ssl_, ep_.host.c_str());
    if (session_) SSL_set_session(ssl_, session_);
    int ret = SSL_connect(ssl_);
    if (ret != 1) {
        std::string msg = tls_failure(ssl_, ret, "TLS handshake");
        long verify = SSL_get_verify_result(ssl_);
        if (verify != X509_V_OK) msg += std::string(": ") + X509_verify_cert_error_string(verify);
        close();
        throw NetError(Failure::connection, msg);
    }
    ++(SSL_session_reused(ssl_) ? stats.resumed : stats.full);
    version_ = SSL_get_version(ssl_);
    cipher_ = SSL_get_current_cipher(ssl_);
}

Response Conn::request(const Request& rq, bool head) {
    if (fd_ < 0) connect();
    std::string head_text;
    head_text.reserve(256 + rq.target.size() + rq.headers.size());
    head_text += rq.method;
    head_text += ' ';
    head_text += rq.target;
    head_text += " HTTP/1.1\r\nHost: ";
    head_text += ep_.host_header;
    head_text += "\r\nUser-Agent: berth-bench\r\n";
    head_text += rq.headers;
    bool has_body = !rq.body.empty() || rq.body_len > 0 || std::strcmp(rq.method, "PUT") == 0 ||
                    std::strcmp(rq.method, "POST") == 0 || std::strcmp(rq.method, "PATCH") == 0;
    if (has_body) head_text += "Content-Length: " + std::to_string(rq.body_len) + "\r\n";
    head_text += "\r\n";
    std::vector<iovec> iov;
    iov.reserve(rq.body.size() + 1);
    iov.push_back({head_text.data(), head_text.size()});
    for (auto& v : rq.body)
        if (v.iov_len) iov.push_back(v);
    try {
        send_all(iov);
    } catch (const NetError&) {
        // The server may have answered early (e.g. an error) and closed; try to read that answer.
        try {
            Response r = read_response(rq.keep_body, head);
            close();
            return r;
        } catch (const NetError&) {
            close();
            throw;
        }
    }
    try {
        return read_response(rq.keep_body, head);
    } catch (const NetError&) {
        close();
        throw;
    }
}

}  // namespace berth::bench
