#include "tls_stream.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/error.hpp>
#include <boost/asio/ssl/error.hpp>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace berth::http {

namespace {

// Ciphertext a wait for input takes at most; what follows it is read straight
// into OpenSSL's buffer, so this need not be large.
constexpr std::size_t wait_buffer_bytes = 4096;
// How much OpenSSL asks for per read: several full records at a time.
constexpr std::size_t read_ahead_bytes = 64 * 1024;
// A write buffer grown past this by large writes is given back at the next
// small one (a response head), so keep-alive connections stay small.
constexpr std::size_t kept_write_capacity = 64 * 1024;

}  // namespace

// OpenSSL's side of the stream: writes collect in out_, reads take what the
// wait left in in_ and then whatever the socket holds.
struct TlsBio {
    static TlsStream& stream(BIO* bio) { return *static_cast<TlsStream*>(BIO_get_data(bio)); }

    static int write(BIO* bio, const char* data, std::size_t size, std::size_t* written) {
        stream(bio).out_.append(data, size);
        *written = size;
        return 1;
    }

    static int read(BIO* bio, char* data, std::size_t size, std::size_t* read) {
        auto& s = stream(bio);
        BIO_clear_retry_flags(bio);
        if (s.in_begin_ < s.in_end_) {
            *read = std::min(size, s.in_end_ - s.in_begin_);
            std::memcpy(data, s.in_.data() + s.in_begin_, *read);
            s.in_begin_ += *read;
            return 1;
        }
        for (;;) {
            auto n = ::recv(s.next_.socket().native_handle(), data, size, MSG_DONTWAIT);
            if (n > 0) {
                *read = static_cast<std::size_t>(n);
                return 1;
            }
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) BIO_set_retry_read(bio);
            else if (n < 0) s.socket_errno_ = errno;
            return 0;  // without the retry flag: the peer closed, or the socket failed
        }
    }

    static long control(BIO* bio, int command, long, void*) {
        switch (command) {
            case BIO_CTRL_FLUSH: return 1;  // each operation sends what it wrote before it completes
            case BIO_CTRL_PENDING: return static_cast<long>(stream(bio).in_end_ - stream(bio).in_begin_);
            case BIO_CTRL_WPENDING: return static_cast<long>(stream(bio).out_.size());
            default: return 0;
        }
    }

    static BIO_METHOD* method() {
        static BIO_METHOD* const made = [] {
            auto* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "berth-tls-stream");
            if (!m || !BIO_meth_set_write_ex(m, &write) || !BIO_meth_set_read_ex(m, &read) ||
                !BIO_meth_set_ctrl(m, &control))
                throw std::runtime_error("cannot make the TLS BIO");
            return m;
        }();
        return made;
    }
};

TlsStream::TlsStream(boost::asio::ip::tcp::socket socket, SSL_CTX* context)
    : next_(std::move(socket)), in_(wait_buffer_bytes) {
    ssl_ = SSL_new(context);
    BIO* bio = ssl_ ? BIO_new(TlsBio::method()) : nullptr;
    if (!bio) {
        SSL_free(ssl_);
        throw std::runtime_error("cannot start a TLS connection");
    }
    BIO_set_data(bio, this);
    BIO_set_init(bio, 1);
    SSL_set_bio(ssl_, bio, bio);
    SSL_set_accept_state(ssl_);
    SSL_set_read_ahead(ssl_, 1);
    SSL_set_default_read_buffer_len(ssl_, read_ahead_bytes);
    // An idle connection holds no record buffers.
    SSL_set_mode(ssl_, SSL_MODE_RELEASE_BUFFERS);
    // HTTP frames its messages, so a close without close_notify is an ordinary end.
    SSL_set_options(ssl_, SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF);
}

TlsStream::~TlsStream() { SSL_free(ssl_); }

int TlsStream::read_into(boost::asio::mutable_buffer buffer, std::size_t& done) {
    auto* data = static_cast<char*>(buffer.data());
    for (;;) {
        std::size_t n = 0;
        const int result = SSL_read_ex(ssl_, data + done, buffer.size() - done, &n);
        if (result <= 0) {
            if (done > 0 && SSL_get_error(ssl_, result) == SSL_ERROR_WANT_READ) return 1;
            return result;
        }
        done += n;
        if (done == buffer.size()) return 1;
    }
}

int TlsStream::write_from(const std::vector<boost::asio::const_buffer>& pieces, std::size_t& done) {
    std::size_t total = 0;
    for (auto& piece : pieces) total += piece.size();
    if (total < kept_write_capacity && out_.capacity() > kept_write_capacity) std::string().swap(out_);
    // A response head comes in many small pieces: one record, not one each.
    if (pieces.size() > 1 && total <= max_write_bytes) {
        joined_.clear();
        for (auto& piece : pieces) joined_.append(static_cast<const char*>(piece.data()), piece.size());
        std::size_t n = 0;
        const int result = SSL_write_ex(ssl_, joined_.data(), joined_.size(), &n);
        if (result > 0) done = n;
        return result;
    }
    for (auto& piece : pieces) {
        const auto size = std::min(piece.size(), max_write_bytes - done);
        std::size_t n = 0;
        const int result = SSL_write_ex(ssl_, piece.data(), size, &n);
        if (result <= 0) return done > 0 ? 1 : result;
        done += n;
        if (done == max_write_bytes) break;
    }
    return 1;
}

TlsStream::error_code TlsStream::failure(int ssl_error) {
    if (ssl_error == SSL_ERROR_ZERO_RETURN) return boost::asio::error::eof;
    if (ssl_error == SSL_ERROR_SYSCALL)
        return socket_errno_ ? error_code(socket_errno_, boost::system::system_category()) : error_code(boost::asio::error::eof);
    const auto code = ERR_get_error();
    ERR_clear_error();
    if (!code) return boost::asio::error::eof;
    return error_code(static_cast<int>(code), boost::asio::error::get_ssl_category());
}

}  // namespace berth::http
