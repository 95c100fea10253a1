// Conn's sending side: sendmsg for plain memory, sendfile for the memfd pool, SSL_write over TLS.
#include <sys/sendfile.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "http_client.hpp"
#include "tls.hpp"

namespace berth::bench {

// Runs of plain memory go out with sendmsg, pool memory with sendfile.
void Conn::send_all(std::vector<iovec>& iov) {
    if (ssl_) return send_tls(iov);
    std::size_t from = 0;
    for (std::size_t i = 0; i < iov.size(); ++i) {
        auto* region = backing_of(iov[i].iov_base);
        if (!region) continue;
        send_memory(iov, from, i, true);
        send_file(*region, iov[i]);
        from = i + 1;
    }
    send_memory(iov, from, iov.size(), false);
}

void Conn::send_file(const FileBacked& region, const iovec& part) {
    off_t offset = static_cast<const unsigned char*>(part.iov_base) - region.base;
    std::size_t left = part.iov_len;
    while (left > 0) {
        ssize_t n = ::sendfile(fd_, region.fd, &offset, left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw NetError(Failure::connection, std::string("sendfile: ") + std::strerror(n ? errno : EPIPE));
        left -= static_cast<std::size_t>(n);
    }
}

// iov[idx, end); `more`: further body follows, so the kernel may hold a partial packet.
void Conn::send_memory(std::vector<iovec>& iov, std::size_t idx, std::size_t end, bool more) {
    while (idx < end) {
        msghdr msg{};
        msg.msg_iov = iov.data() + idx;
        msg.msg_iovlen = std::min<std::size_t>(end - idx, IOV_MAX);
        ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL | (more ? MSG_MORE : 0));
        if (n < 0) {
            if (errno == EINTR) continue;
            throw NetError(Failure::connection, std::string("send: ") + std::strerror(errno));
        }
        std::size_t left = static_cast<std::size_t>(n);
        while (idx < end && left >= iov[idx].iov_len) {
            left -= iov[idx].iov_len;
            ++idx;
        }
        if (left) {
            iov[idx].iov_base = static_cast<char*>(iov[idx].iov_base) + left;
            iov[idx].iov_len -= left;
        }
    }
}

// Over TLS, pieces smaller than a record are gathered and written together;
// larger ones (the pool's mappings) go to SSL_write whole, which encrypts them
// record by record straight from the mapping. Partial writes stay off
// (OpenSSL's default, no SSL_MODE_ENABLE_PARTIAL_WRITE): SSL_write_ex returns
// once all of a piece is written, or fails.
void Conn::send_tls(const std::vector<iovec>& iov) {
    gather_.clear();
    for (const auto& v : iov) {
        if (v.iov_len < SSL3_RT_MAX_PLAIN_LENGTH) {
            gather_.append(static_cast<const char*>(v.iov_base), v.iov_len);
            continue;
        }
        write_tls(gather_.data(), gather_.size());
        gather_.clear();
        write_tls(v.iov_base, v.iov_len);
    }
    write_tls(gather_.data(), gather_.size());
}

void Conn::write_tls(const void* data, std::size_t n) {
    std::size_t written = 0;
    if (n > 0 && SSL_write_ex(ssl_, data, n, &written) != 1)
        throw NetError(Failure::connection, tls_failure(ssl_, 0, "SSL_write"));
}

}  // namespace berth::bench
