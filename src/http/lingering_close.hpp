#pragma once
// Closing a connection whose client may still be sending what was answered early (413, 431, a
// refused upload): closing with its bytes unread would make the kernel reset the connection, and a
// reset can destroy the answer before the client reads it. So, as nginx's lingering close: stop
// sending, drop what arrives (at most 16 MiB, for at most 3 s), then close.
#include <boost/asio/buffer.hpp>
#include <boost/beast/core.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <vector>

namespace berth::http {

// close runs once, when the lingering is over; owner keeps the connection alive until then.
inline void close_lingering(boost::beast::tcp_stream& lowest, std::shared_ptr<void> owner,
                            std::function<void()> close) {
    constexpr std::uint64_t linger_bytes = 16 << 20;
    constexpr std::chrono::seconds linger_time{3};
    boost::beast::error_code ec;
    lowest.socket().shutdown(boost::asio::ip::tcp::socket::shutdown_send, ec);
    if (ec) return close();
    lowest.expires_after(linger_time);
    struct Drain : std::enable_shared_from_this<Drain> {
        boost::beast::tcp_stream& lowest;
        std::shared_ptr<void> owner;
        std::function<void()> close;
        std::vector<char> buffer = std::vector<char>(64 << 10);
        std::uint64_t dropped = 0;
        Drain(boost::beast::tcp_stream& l, std::shared_ptr<void> o, std::function<void()> c)
            : lowest(l), owner(std::move(o)), close(std::move(c)) {}
        // Below TLS: these bytes are dropped unread, so there is nothing to decrypt.
        void next() {
            lowest.async_read_some(boost::asio::buffer(buffer),
                                   [self = shared_from_this()](boost::beast::error_code error, std::size_t n) {
                                       self->dropped += n;
                                       if (error || self->dropped > linger_bytes) return self->close();
                                       self->next();
                                   });
        }
    };
    std::make_shared<Drain>(lowest, std::move(owner), std::move(close))->next();
}

}  // namespace berth::http
