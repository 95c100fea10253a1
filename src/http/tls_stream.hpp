#pragma once
// The server side of a TLS connection, over a beast::tcp_stream so the
// session's timeouts keep working. It replaces asio's ssl::stream, whose BIO
// pair holds one record at a time: every 16 KiB record cost a send, a copy in
// and a copy out. Here OpenSSL talks to a BIO of ours instead:
// - what it encrypts collects in one buffer that goes out in a single write
//   (up to max_write_bytes of records per send);
// - what it decrypts is read straight from the socket into OpenSSL's own
//   buffer while bytes keep arriving, many records per read; otherwise the
//   stream waits through tcp_stream, with its timeout.
// Like the HTTP/1.1 sessions that use it, it runs one operation at a time:
// a read and a write must not overlap (they share the record buffers).
// Once the handshake is done, OpenSSL offers the connection's send keys to
// the BIO, as it would to a kernel that does TLS (kTLS). Where the kernel has
// TLS and may use it, the BIO hands them on: what the stream sends is then
// encrypted by the kernel, and a blob can go out with sendfile(2) as over
// plain TCP. Elsewhere, for TLS 1.3 with AES-GCM, the BIO seals the records
// itself (tls_record_sealer.hpp), one copy fewer than OpenSSL's record layer.
// Receiving stays in OpenSSL.
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <boost/asio/buffer.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "send_buffer.hpp"
#include "tls_record_sealer.hpp"

namespace berth::http {

// Who may encrypt what a connection sends once its handshake is done, in
// OpenSSL's stead (docs/tls.md).
struct TlsSending {
    bool kernel = false;  // the kernel, where it has TLS (tls.kernel_tls)
    bool berth = false;   // berth's own records otherwise (tls.berth_records)
};

class TlsStream {
public:
    using executor_type = boost::beast::tcp_stream::executor_type;
    using next_layer_type = boost::beast::tcp_stream;
    using error_code = boost::system::error_code;

    // Plaintext taken per write: enough records that a send's fixed cost
    // vanishes, few enough to bound the buffer.
    static constexpr std::size_t max_write_bytes = 256 * 1024;

    TlsStream(boost::asio::ip::tcp::socket socket, SSL_CTX* context, TlsSending sending);
    ~TlsStream();
    TlsStream(const TlsStream&) = delete;
    TlsStream& operator=(const TlsStream&) = delete;

    executor_type get_executor() { return next_.get_executor(); }
    next_layer_type& next_layer() { return next_; }
    SSL* native_handle() { return ssl_; }
    // The kernel encrypts what is written to the socket (kTLS): sendfile(2) works.
    bool kernel_encrypts() const { return kernel_sends_; }
    // berth seals the records it sends (TlsRecordSealer).
    bool berth_encrypts() const { return sealer_.active(); }

    template <typename Token>
    auto async_handshake(Token&& token) {
        return run([](TlsStream& s, std::size_t&) { return SSL_do_handshake(s.ssl_); }, std::forward<Token>(token));
    }

    // Decrypts into the caller's buffer as many records as have arrived.
    template <typename MutableBuffers, typename Token>
    auto async_read_some(const MutableBuffers& buffers, Token&& token) {
        boost::asio::mutable_buffer first;
        for (auto it = boost::asio::buffer_sequence_begin(buffers); it != boost::asio::buffer_sequence_end(buffers);
             ++it)
            if (boost::asio::buffer_size(*it)) {
                first = *it;
                break;
            }
        return run([first](TlsStream& s, std::size_t& done) { return s.read_into(first, done); },
                   std::forward<Token>(token));
    }

    // Encrypts up to max_write_bytes of the buffers, then sends the records at once.
    template <typename ConstBuffers, typename Token>
    auto async_write_some(const ConstBuffers& buffers, Token&& token) {
        std::vector<boost::asio::const_buffer> pieces;
        for (auto it = boost::asio::buffer_sequence_begin(buffers); it != boost::asio::buffer_sequence_end(buffers);
             ++it)
            if (boost::asio::buffer_size(*it)) pieces.emplace_back(*it);
        return run([pieces = std::move(pieces)](TlsStream& s, std::size_t& done) { return s.write_from(pieces, done); },
                   std::forward<Token>(token));
    }

private:
    friend struct TlsBio;
    friend void tls_key_logged(const SSL* ssl, const char* line);

    // One TLS operation: retried after each wait for input, and finished once
    // the records it produced have been sent. `attempt` returns OpenSSL's
    // result (> 0: done) and counts the plaintext bytes it moved.
    template <typename Attempt, typename Token>
    auto run(Attempt attempt, Token&& token) {
        enum class State { starting, reading, flushing, flushing_then_retry, flushing_then_fail };
        return boost::asio::async_compose<Token, void(error_code, std::size_t)>(
            [this, attempt = std::move(attempt), done = std::size_t{0}, state = State::starting, failed = error_code{}](
                auto& self, error_code ec = {}, std::size_t n = 0) mutable {
                // Errors carry no byte count (Beast asserts it): the connection is done for.
                if (state == State::reading) {
                    if (ec) return self.complete(ec, 0);
                    in_end_ += n;
                    in_burst_ = true;  // more may follow what the wait brought
                } else if (state == State::flushing_then_fail) {
                    out_.clear();
                    return self.complete(failed, 0);
                } else if (state == State::flushing || state == State::flushing_then_retry) {
                    out_.clear();
                    if (ec) return self.complete(ec, 0);
                    if (state == State::flushing) return self.complete({}, done);
                }
                ERR_clear_error();  // SSL_get_error reads this thread's queue
                const int result = attempt(*this, done);
                if (result > 0) {
                    if (out_.empty()) return self.complete({}, done);
                    state = State::flushing;
                    return boost::asio::async_write(next_, unsent(), std::move(self));
                }
                const int error = SSL_get_error(ssl_, result);
                if (error != SSL_ERROR_WANT_READ) {
                    // The alert OpenSSL wrote (a refused certificate, say) goes out
                    // first, so the client reads why instead of a bare end of stream.
                    failed = failure(error);
                    if (out_.empty()) return self.complete(failed, 0);
                    state = State::flushing_then_fail;
                    return boost::asio::async_write(next_, unsent(), std::move(self));
                }
                // Records owed to the peer (a handshake flight, an alert) go before waiting for its answer.
                if (!out_.empty()) {
                    state = State::flushing_then_retry;
                    return boost::asio::async_write(next_, unsent(), std::move(self));
                }
                state = State::reading;
                if (in_begin_ == in_end_) in_begin_ = in_end_ = 0;
                next_.async_read_some(boost::asio::buffer(in_.data() + in_end_, in_.size() - in_end_), std::move(self));
            },
            token, next_);
    }

    boost::asio::const_buffer unsent() const { return {out_.data(), out_.size()}; }
    int read_into(boost::asio::mutable_buffer buffer, std::size_t& done);
    int write_from(const std::vector<boost::asio::const_buffer>& pieces, std::size_t& done);
    error_code failure(int ssl_error);
    bool take_send_keys(long sending, void* keys);

    boost::beast::tcp_stream next_;
    SSL* ssl_ = nullptr;
    // Ciphertext that arrived while OpenSSL waited: [in_begin_, in_end_).
    std::vector<char> in_;
    std::size_t in_begin_ = 0, in_end_ = 0;
    // Bytes are arriving: OpenSSL may read the socket directly until it is empty.
    bool in_burst_ = false;
    SendBuffer out_;      // records not sent yet
    std::string joined_;  // small write pieces joined, so they share a record
    int socket_errno_ = 0;
    // With the kernel allowed to encrypt: OpenSSL's own socket BIO, which
    // hands the keys to the kernel and sends the records that are not
    // application data.
    BIO* socket_bio_ = nullptr;
    bool kernel_sends_ = false;
    bool kernel_keys_stale_ = false;  // after a KeyUpdate the kernel was not told of
    bool berth_may_seal_ = false;
    TlsRecordSealer sealer_;
    // The record type OpenSSL marked the next write with (an alert, a
    // handshake message); 0 for application data.
    int control_type_ = 0;
};

}  // namespace berth::http
