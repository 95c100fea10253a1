#include "tls_stream.hpp"

#include "session.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

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
// Records waiting to be sent, at most: a write's plaintext and their
// overhead, or a handshake flight with a long certificate chain, fit well.
constexpr std::size_t max_unsent_bytes = 2 * TlsStream::max_write_bytes;
// A write buffer grown past this by large writes is given back at the next
// small one (a response head), so keep-alive connections stay small.
constexpr std::size_t kept_write_capacity = 64 * 1024;

// OpenSSL's kTLS controls of a BIO (its include/internal/bio.h; the numbers
// are reserved in the public openssl/bio.h and fixed across 3.x).
constexpr int ktls_set_keys = 72;             // num: non-zero send (SSL3_CC_WRITE, 2), 0 receive; ptr: the keys
constexpr int ktls_send_control_record = 74;  // num: the record type of the next write
constexpr int ktls_clear_control_record = 75;

constexpr std::uint8_t application_data = 23;

// Sends what the buffer holds now, without waiting; true once it is empty.
bool send_now(int fd, SendBuffer& out) {
    while (!out.empty()) {
        auto n = ::send(fd, out.data(), out.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        out.consume(static_cast<std::size_t>(n));
    }
    return true;
}

}  // namespace

// OpenSSL's side of the stream: writes collect in out_, reads take what the
// wait left in in_ and then whatever the socket holds.
struct TlsBio {
    static TlsStream& stream(BIO* bio) { return *static_cast<TlsStream*>(BIO_get_data(bio)); }

    static int write(BIO* bio, const char* data, std::size_t size, std::size_t* written) {
        auto& s = stream(bio);
        BIO_clear_retry_flags(bio);
        // A mark applies to one write (OpenSSL's socket BIO clears its own too).
        const int type = s.control_type_;
        s.control_type_ = 0;
        // Without the retry flag a refusal fails the connection. Records owed
        // while a read goes on (answers to KeyUpdates) wait in out_ until it
        // ends: a client that keeps asking may not grow it without bound.
        if (s.kernel_keys_stale_ || s.out_.size() + size > max_unsent_bytes) return 0;
        if (s.sealer_.active()) {
            if (!s.sealer_.seal(type ? static_cast<std::uint8_t>(type) : application_data,
                                reinterpret_cast<const unsigned char*>(data), size, s.out_))
                return 0;
            *written = size;
            return 1;
        }
        // Under kTLS only application data may be written as it is: a
        // handshake or alert record goes through OpenSSL's socket BIO, which
        // tells the kernel its type. These are small and rare; the socket
        // takes them at once or the connection fails.
        if (s.kernel_sends_ && type) {
            if (!send_now(s.next_.socket().native_handle(), s.out_)) return 0;
            const int n = BIO_write(s.socket_bio_, data, static_cast<int>(size));
            if (n <= 0) return 0;
            *written = static_cast<std::size_t>(n);
            return 1;
        }
        s.out_.append(data, size);
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
        // Outside a burst the socket is most likely empty: wait (asio tries
        // a read first) rather than spend a system call to find out.
        if (!s.in_burst_) {
            BIO_set_retry_read(bio);
            return 0;
        }
        for (;;) {
            auto n = ::recv(s.next_.socket().native_handle(), data, size, MSG_DONTWAIT);
            if (n > 0) {
                *read = static_cast<std::size_t>(n);
                return 1;
            }
            if (n < 0 && errno == EINTR) continue;
            s.in_burst_ = false;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) BIO_set_retry_read(bio);
            else if (n < 0) s.socket_errno_ = errno;
            return 0;  // without the retry flag: the peer closed, or the socket failed
        }
    }

    static long control(BIO* bio, int command, long number, void* pointer) {
        auto& s = stream(bio);
        switch (command) {
            case BIO_CTRL_FLUSH: return 1;  // each operation sends what it wrote before it completes
            case BIO_CTRL_PENDING: return static_cast<long>(s.in_end_ - s.in_begin_);
            case BIO_CTRL_WPENDING: return static_cast<long>(s.out_.size());
            case BIO_CTRL_GET_KTLS_SEND: return s.kernel_sends_ || s.sealer_.active() ? 1 : 0;
            case ktls_set_keys: return s.take_send_keys(number, pointer) ? 1 : 0;
            case ktls_send_control_record:
            case ktls_clear_control_record:
                s.control_type_ = command == ktls_send_control_record ? static_cast<int>(number) : 0;
                if (s.kernel_sends_) return BIO_ctrl(s.socket_bio_, command, number, pointer);
                return s.sealer_.active() ? 1 : 0;
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

TlsStream::TlsStream(boost::asio::ip::tcp::socket socket, SSL_CTX* context, TlsSending sending)
    : next_(std::move(socket)), in_(wait_buffer_bytes), berth_may_seal_(sending.berth) {
    ssl_ = SSL_new(context);
    BIO* bio = ssl_ ? BIO_new(TlsBio::method()) : nullptr;
    if (!bio) {
        SSL_free(ssl_);
        throw std::runtime_error("cannot start a TLS connection");
    }
    BIO_set_data(bio, this);
    BIO_set_init(bio, 1);
    SSL_set_bio(ssl_, bio, bio);
    SSL_set_app_data(ssl_, this);  // for tls_key_logged
    SSL_set_accept_state(ssl_);
    SSL_set_read_ahead(ssl_, 1);
    SSL_set_default_read_buffer_len(ssl_, read_ahead_bytes);
    // An idle connection holds no record buffers.
    SSL_set_mode(ssl_, SSL_MODE_RELEASE_BUFFERS);
    // HTTP frames its messages, so a close without close_notify is an ordinary end.
    SSL_set_options(ssl_, SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF);
    // OpenSSL offers its send keys only to a BIO of a connection with kTLS enabled.
    if (sending.kernel || sending.berth) SSL_set_options(ssl_, SSL_OP_ENABLE_KTLS);
    if (sending.kernel) socket_bio_ = BIO_new_socket(next_.socket().native_handle(), BIO_NOCLOSE);
}

TlsStream::~TlsStream() {
    SSL_free(ssl_);
    BIO_free(socket_bio_);
}

// OpenSSL offers the send keys (keys: the kernel's tls12_crypto_info_* layout)
// once the handshake is done; taking them means it no longer encrypts what it
// writes. Refused, it goes on encrypting as before.
bool TlsStream::take_send_keys(long sending, void* keys) {
    if (sending == 0) return false;  // receive keys: decryption stays in OpenSSL
    if (socket_bio_ && !kernel_sends_ && !sealer_.active()) {
        // Records already encrypted must all be out before the kernel encrypts what follows.
        if (!send_now(next_.socket().native_handle(), out_)) return false;
        kernel_sends_ = BIO_ctrl(socket_bio_, ktls_set_keys, sending, keys) > 0;
        if (kernel_sends_) return true;
    }
    // New keys replace the old (start() drops them first, so a refusal leaves OpenSSL encrypting).
    return berth_may_seal_ && !kernel_sends_ && sealer_.start(keys);
}

void tls_key_logged(const SSL* ssl, const char* line) {
    // Only the send secret after a KeyUpdate is wanted: "SERVER_TRAFFIC_SECRET_N <client random> <secret>",
    // in hex. The others (and every secret) are not kept.
    constexpr std::string_view label = "SERVER_TRAFFIC_SECRET_N ";
    const std::string_view text(line);
    auto* stream = static_cast<TlsStream*>(SSL_get_app_data(ssl));
    if (!stream || !text.starts_with(label)) return;
    if (stream->kernel_sends_) {
        // OpenSSL 3.0 does not give the kernel the new key: what the kernel would
        // encrypt now the client could not read. The connection ends at its next write.
        stream->kernel_keys_stale_ = true;
        return;
    }
    const auto space = text.find(' ', label.size());
    if (space == std::string_view::npos) return;
    const auto hex = text.substr(space + 1);
    unsigned char secret[64];
    bool parsed = hex.size() % 2 == 0 && hex.size() / 2 <= sizeof secret;
    for (std::size_t i = 0; parsed && i < hex.size() / 2; ++i) {
        const auto high = OPENSSL_hexchar2int(static_cast<unsigned char>(hex[2 * i]));
        const auto low = OPENSSL_hexchar2int(static_cast<unsigned char>(hex[2 * i + 1]));
        parsed = high >= 0 && low >= 0;
        secret[i] = static_cast<unsigned char>(high << 4 | low);
    }
    // Unparsed, the sealer stays waiting for a key, and the connection fails at its next write.
    if (parsed) stream->sealer_.rekey(secret, hex.size() / 2);
    OPENSSL_cleanse(secret, sizeof secret);
}

int TlsStream::read_into(boost::asio::mutable_buffer buffer, std::size_t& done) {
    auto* data = static_cast<char*>(buffer.data());
    for (;;) {
        std::size_t n = 0;
        const int result = SSL_read_ex(ssl_, data + done, buffer.size() - done, &n);
        // Bytes read are reported first; a failure after them (the peer's
        // close_notify in the same segment, say) comes with the next read.
        if (result <= 0) return done > 0 ? 1 : result;
        done += n;
        // Nothing more decrypted or buffered: a small request is whole, and
        // asking the socket again would mostly find it empty.
        if (done == buffer.size() || (!SSL_has_pending(ssl_) && in_begin_ == in_end_)) {
            in_burst_ = false;
            return 1;
        }
    }
}

int TlsStream::write_from(const std::vector<boost::asio::const_buffer>& pieces, std::size_t& done) {
    std::size_t total = 0;
    for (auto& piece : pieces) total += piece.size();
    if (total < kept_write_capacity && out_.capacity() > kept_write_capacity && out_.empty()) out_.deallocate();
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
        return socket_errno_ ? error_code(socket_errno_, boost::system::system_category())
                             : error_code(boost::asio::error::eof);
    const auto code = ERR_get_error();
    ERR_clear_error();
    if (!code) return boost::asio::error::eof;
    return error_code(static_cast<int>(code), boost::asio::error::get_ssl_category());
}

}  // namespace berth::http
