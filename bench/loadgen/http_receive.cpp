// Conn's receiving side: the status line, headers and body (by length, chunked or to close) of an answer.
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "http_client.hpp"
#include "tls.hpp"

namespace berth::bench {

// Up to n bytes into p, with recv or, over TLS, SSL_read; 0 on orderly close.
std::size_t Conn::receive(char* p, std::size_t n, Failure kind, const char* what) {
    if (!ssl_) {
        for (;;) {
            ssize_t got = ::recv(fd_, p, n, 0);
            if (got >= 0) return static_cast<std::size_t>(got);
            if (errno != EINTR) throw NetError(kind, std::string(what) + ": " + std::strerror(errno));
        }
    }
    std::size_t got = 0;
    int ret = SSL_read_ex(ssl_, p, n, &got);
    if (ret == 1) return got;
    if (SSL_get_error(ssl_, ret) == SSL_ERROR_ZERO_RETURN) return 0;
    throw NetError(kind, tls_failure(ssl_, ret, what));
}

// Appends received bytes to buf_; false on orderly close.
bool Conn::fill() {
    if (pos_ > 0 && pos_ == buf_.size()) {
        buf_.clear();
        pos_ = 0;
    } else if (pos_ > (1 << 16)) {
        buf_.erase(0, pos_);
        pos_ = 0;
    }
    char tmp[65536];
    std::size_t n = receive(tmp, sizeof tmp, Failure::connection, "recv");
    buf_.append(tmp, n);
    return n > 0;
}

std::string Conn::read_line() {
    for (;;) {
        auto e = buf_.find("\r\n", pos_);
        if (e != std::string::npos) {
            std::string line = buf_.substr(pos_, e - pos_);
            pos_ = e + 2;
            return line;
        }
        if (buf_.size() - pos_ > 65536) throw NetError(Failure::connection, "line too long");
        if (!fill()) throw NetError(Failure::short_read, "connection closed mid-line");
    }
}

// Reads n body bytes, keeping them in *out when given.
void Conn::read_body(std::uint64_t n, std::string* out, Response& r) {
    std::size_t avail = std::min<std::uint64_t>(n, buf_.size() - pos_);
    if (out) out->append(buf_, pos_, avail);
    pos_ += avail;
    n -= avail;
    r.body_bytes += avail;
    while (n > 0) {
        std::size_t want = std::min<std::uint64_t>(n, scratch_.size());
        std::size_t got = receive(scratch_.data(), want, Failure::short_read, "recv body");
        if (got == 0)
            throw NetError(Failure::short_read, "connection closed with " + std::to_string(n) + " body bytes missing");
        if (out) out->append(scratch_.data(), got);
        n -= got;
        r.body_bytes += got;
    }
}

Response Conn::read_response(bool keep_body, bool head) {
    Response r;
    for (;;) {
        std::string status = read_line();
        if (status.rfind("HTTP/1.", 0) != 0 || status.size() < 12)
            throw NetError(Failure::connection, "bad status line: " + status.substr(0, 80));
        r.status = std::atoi(status.c_str() + 9);
        r.headers.clear();
        for (;;) {
            std::string line = read_line();
            if (line.empty()) break;
            auto colon = line.find(':');
            if (colon == std::string::npos) continue;
            std::string name = line.substr(0, colon);
            for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
            std::size_t v = colon + 1;
            while (v < line.size() && (line[v] == ' ' || line[v] == '\t')) ++v;
            r.headers[name] = line.substr(v);
        }
        if (r.status >= 200) break;  // skip 1xx interim answers
    }
    bool close_after = false;
    std::string connection = r.header("connection");
    for (auto& ch : connection) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (connection.find("close") != std::string::npos) close_after = true;
    std::string* out = keep_body ? &r.body : nullptr;
    if (head || r.status == 204 || r.status == 304) {
        // no body
    } else if (r.header("transfer-encoding").find("chunked") != std::string::npos) {
        for (;;) {
            std::string line = read_line();
            std::uint64_t n = std::strtoull(line.c_str(), nullptr, 16);
            if (n == 0) {
                while (!read_line().empty()) {}
                break;
            }
            read_body(n, out, r);
            read_line();
        }
    } else if (!r.header("content-length").empty()) {
        read_body(std::strtoull(r.header("content-length").c_str(), nullptr, 10), out, r);
    } else {
        // Body delimited by close.
        if (out) out->append(buf_, pos_, std::string::npos);
        r.body_bytes += buf_.size() - pos_;
        pos_ = buf_.size();
        while (fill()) {
            if (out) out->append(buf_, pos_, std::string::npos);
            r.body_bytes += buf_.size() - pos_;
            pos_ = buf_.size();
        }
        close_after = true;
    }
    if (close_after) end();
    return r;
}

}  // namespace berth::bench
