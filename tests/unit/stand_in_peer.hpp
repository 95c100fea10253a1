#pragma once
// A stand-in peer on loopback for the Replicator's unit tests: it answers POST apply with 200
// (acks), 503 (refuses) or nothing at all (stalls), or every request with a 200 that is not a page
// of a log (garbage: a peer that answers and then fails to be read) or that names protocol versions
// this build does not speak (incompatible), or every request with a 404 (absent: a peer that
// holds nothing asked for, as after a delete).
#include <sys/socket.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <list>
#include <mutex>
#include <string>
#include <thread>

#include "berth/replication/protocol.hpp"

namespace berth::test {

class StandInPeer {
public:
    enum class Mode { ack, refuse, stall, garbage, incompatible, absent };

    explicit StandInPeer(Mode mode) : mode_(mode), acceptor_(io_, {boost::asio::ip::make_address("127.0.0.1"), 0}) {
        accepting_ = std::thread([this] { accept(); });
    }

    ~StandInPeer() {
        {
            std::lock_guard lock(mutex_);
            stopping_ = true;
            for (auto& socket : sockets_) ::shutdown(socket.native_handle(), SHUT_RDWR);
        }
        stopped_.notify_all();
        ::shutdown(acceptor_.native_handle(), SHUT_RDWR);  // wakes the blocked accept
        accepting_.join();
        for (auto& thread : serving_) thread.join();
    }

    std::string address() const { return "127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port()); }
    int applies() const { return applies_; }
    std::string last_body() {
        std::lock_guard lock(mutex_);
        return last_body_;
    }

private:
    void accept() {
        for (;;) {
            boost::asio::ip::tcp::socket socket(io_);
            boost::system::error_code ec;
            acceptor_.accept(socket, ec);
            std::lock_guard lock(mutex_);
            if (ec || stopping_) return;
            auto& kept = sockets_.emplace_back(std::move(socket));
            serving_.emplace_back([this, &kept] { serve(kept); });
        }
    }

    void serve(boost::asio::ip::tcp::socket& socket) {
        boost::beast::flat_buffer buffer;
        for (;;) {
            boost::beast::http::request<boost::beast::http::string_body> request;
            boost::system::error_code ec;
            boost::beast::http::read(socket, buffer, request, ec);
            if (ec) return;
            if (request.target() == replication::protocol::apply_target()) {
                ++applies_;
                std::lock_guard lock(mutex_);
                last_body_ = request.body();
            }
            if (mode_ == Mode::stall) {
                std::unique_lock lock(mutex_);
                stopped_.wait(lock, [&] { return stopping_; });
                return;
            }
            using boost::beast::http::status;
            boost::beast::http::response<boost::beast::http::string_body> response(
                mode_ == Mode::refuse   ? status::service_unavailable
                : mode_ == Mode::absent ? status::not_found
                                        : status::ok,
                11);
            response.body() = mode_ == Mode::garbage ? "not a page of a log" : "{}";
            if (mode_ == Mode::garbage)
                response.set(replication::protocol::header::versions, replication::protocol::versions_text());
            if (mode_ == Mode::incompatible) response.set(replication::protocol::header::versions, "99-99");
            response.prepare_payload();
            boost::beast::http::write(socket, response, ec);
            if (ec) return;
        }
    }

    Mode mode_;
    boost::asio::io_context io_;
    boost::asio::ip::tcp::acceptor acceptor_;
    std::mutex mutex_;
    std::condition_variable stopped_;
    bool stopping_ = false;
    std::list<boost::asio::ip::tcp::socket> sockets_;
    std::list<std::thread> serving_;
    std::thread accepting_;
    std::atomic<int> applies_{0};
    std::string last_body_;
};

}  // namespace berth::test
