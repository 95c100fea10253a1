#pragma once
// Sends a response's file body (a blob) on a connection: with plain TCP the
// kernel copies page-cache pages to the socket (sendfile, kernel TLS too);
// with user-space TLS a piece is read, then encrypted while it is still in
// the CPU's cache. A window is sent only once it is in the page cache, so an
// I/O thread never waits for the disk: a worker reads it in first. A blob
// still arriving (proxy fetch) is sent as far as it has come. A blob with no
// descriptor (an object store's) is read a piece at a time on a worker.
#include <sys/sendfile.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <cerrno>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "berth/storage/page_cache.hpp"
#include "context.hpp"
#include "message.hpp"
#include "tls_stream.hpp"

namespace berth::http {

template <typename Stream>
class FileSender {
    static constexpr bool tls = !std::is_same_v<Stream, boost::beast::tcp_stream>;
    // How much of a file is made sure to be in the page cache at a time.
    static constexpr std::uint64_t window_bytes = 4 << 20;
    // With user-space TLS: what one write encrypts (TlsStream takes at most this).
    static constexpr std::size_t piece_bytes = TlsStream::max_write_bytes;

public:
    FileSender(Stream& stream, ServerContext& context)
        : stream_(stream), context_(context), timer_(stream.get_executor()) {}
    ~FileSender() { close(); }

    // Sends file's bytes, then done(true); done(false) when the connection must close. owner
    // keeps the connection (and so this) alive while a send is under way.
    void send(FileBody file, std::shared_ptr<void> owner, std::function<void(bool)> done) {
        file_ = std::move(file);
        owner_ = std::move(owner);
        done_ = std::move(done);
        if (file_->blob->fd() < 0) return copy();
        if constexpr (tls)
            if (!stream_.kernel_encrypts()) return copy();
        send_kernel();
    }

    // Bytes promised but not sent: a body cut short counts what was sent.
    std::uint64_t unsent() const { return file_ ? file_->length : 0; }

    void close() {
        file_.reset();
        cached_until_ = 0;
        owner_.reset();
    }

private:
    boost::beast::tcp_stream& lowest() { return boost::beast::get_lowest_layer(stream_); }

    // Ends the send; the callback may start the connection's next request, or close it.
    void end(bool ok) {
        auto done = std::move(done_);
        auto owner = std::move(owner_);  // alive until done returns
        if (done) done(ok);
    }

    void copy() {
        if (file_->length == 0) return end(true);
        if (!window_cached(&FileSender::copy)) return;
        if (piece_.size() < piece_bytes) piece_.resize(piece_bytes);
        auto want = static_cast<std::size_t>(std::min<std::uint64_t>(cached_until_ - file_->offset, piece_bytes));
        if (file_->blob->fd() < 0) return read_on_worker(want);
        auto n = ::pread(file_->blob->fd(), piece_.data(), want, static_cast<off_t>(file_->offset));
        if (n <= 0) return end(false);
        write_piece(static_cast<std::size_t>(n));
    }

    // No descriptor: the read waits on another party (an object store), so it runs on that
    // party's pool, never on the workers everyone else needs.
    void read_on_worker(std::size_t want) {
        auto read = [this, owner = owner_, blob = file_->blob, offset = file_->offset, want] {
            std::size_t n = 0;
            try {
                n = blob->read(offset, {piece_.data(), want});
            } catch (const std::exception&) {}
            boost::asio::post(stream_.get_executor(), [this, owner, n] {
                if (!file_) return;
                if (n == 0) return end(false);  // cut short, or the store failed: the body ends early
                write_piece(n);
            });
        };
        if (!context_.party_pools.post(file_->blob->party(), [read](auto) { read(); })) end(false);
    }

    void write_piece(std::size_t n) {
        file_->offset += n;
        file_->length -= n;
        write_rest(0, n);
    }

    // With user-space TLS one write_some takes the whole piece (asio::async_write would cut it
    // into 64 KiB writes); a plain socket may take less, and is given the rest.
    void write_rest(std::size_t from, std::size_t to) {
        lowest().expires_after(context_.options.body_timeout);
        stream_.async_write_some(boost::asio::buffer(piece_.data() + from, to - from),
                                 [this, owner = owner_, from, to](boost::beast::error_code ec, std::size_t written) {
                                     if (ec || written == 0) return end(false);
                                     if (!file_) return;  // closed meanwhile
                                     if (from + written < to) return write_rest(from + written, to);
                                     copy();
                                 });
    }

    void send_kernel() {
        auto& socket = lowest().socket();
        boost::beast::error_code ec;
        socket.native_non_blocking(true, ec);
        while (file_->length > 0) {
            if (!window_cached(&FileSender::send_kernel)) return;
            off_t offset = static_cast<off_t>(file_->offset);
            auto n = ::sendfile(socket.native_handle(), file_->blob->fd(), &offset,
                                static_cast<std::size_t>(std::min(file_->length, cached_until_ - file_->offset)));
            if (n > 0) {
                file_->offset += static_cast<std::uint64_t>(n);
                file_->length -= static_cast<std::uint64_t>(n);
                if constexpr (tls)
                    context_.request_metrics.blob_bytes_sent_by_kernel_tls += static_cast<std::uint64_t>(n);
                continue;
            }
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return wait_writable();
            return end(false);  // 0: the file is shorter than promised; or a socket error
        }
        end(true);
    }

    // True when the file's next bytes are in the page cache. Otherwise a
    // worker reads the next window in and `resume` runs on this connection's
    // thread once it is there.
    bool window_cached(void (FileSender::*resume)()) {
        if (file_->offset < cached_until_) return true;
        if (file_->blob->filling()) return filling_window(resume);
        if (file_->blob->fd() < 0) {
            cached_until_ = file_->offset + file_->length;  // no page cache to wait for: read_on_worker
            return true;
        }
        const auto window = std::min(file_->length, window_bytes);
        if (storage::in_page_cache(file_->blob->fd(), file_->offset, window)) {
            cached_until_ = file_->offset + window;
            return true;
        }
        context_.request_metrics.blob_bytes_read_from_disk += window;
        boost::asio::post(context_.worker_pool,
                          [this, owner = owner_, blob = file_->blob, offset = file_->offset, window, resume] {
                              storage::load_into_page_cache(blob->fd(), offset, window, window_bytes);
                              boost::asio::post(stream_.get_executor(), [this, owner, until = offset + window, resume] {
                                  cached_until_ = until;
                                  if (file_) (this->*resume)();
                              });
                          });
        return false;
    }

    // A blob still arriving: send what is there (just written, so in the page
    // cache), else wait for more; a failed fetch cuts the body short.
    bool filling_window(void (FileSender::*resume)()) {
        auto& filling = *file_->blob->filling();
        if (auto readable = filling.readable(); file_->offset < readable) {
            cached_until_ = readable;
            return true;
        }
        if (filling.failed()) {
            end(false);
            return false;
        }
        filling.when_readable(file_->offset, [this, owner = owner_, resume] {
            boost::asio::post(stream_.get_executor(), [this, owner, resume] {
                if (file_) (this->*resume)();
            });
        });
        return false;
    }

    void wait_writable() {
        timer_.expires_after(context_.options.body_timeout);
        timer_.async_wait([this, owner = owner_](boost::beast::error_code ec) {
            if (!ec) lowest().socket().cancel();
        });
        lowest().socket().async_wait(boost::asio::ip::tcp::socket::wait_write,
                                     [this, owner = owner_](boost::beast::error_code ec) {
                                         timer_.cancel();
                                         if (ec) return end(false);
                                         send_kernel();
                                     });
    }

    Stream& stream_;
    ServerContext& context_;
    boost::asio::steady_timer timer_;
    std::optional<FileBody> file_;
    std::uint64_t cached_until_ = 0;  // file_ is known to be in the page cache up to here
    std::vector<char> piece_;
    std::shared_ptr<void> owner_;
    std::function<void(bool)> done_;
};

}  // namespace berth::http
