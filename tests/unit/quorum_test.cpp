// The write quorum as Replicator::replicate decides it, against stand-in
// peers on loopback that acknowledge, refuse or never answer the apply request.
#include <sys/socket.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <list>
#include <mutex>
#include <thread>

#include "berth/oci/error.hpp"
#include "berth/replication/protocol.hpp"
#include "berth/replication/replicator.hpp"
#include "error_code.hpp"
#include "fixtures.hpp"

using namespace berth;
namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

namespace {

// A peer that answers POST apply with 200 (acks), 503 (refuses) or nothing at all (stalls).
class StandInPeer {
public:
    enum class Mode { ack, refuse, stall };

    explicit StandInPeer(Mode mode) : mode_(mode), acceptor_(io_, {asio::ip::make_address("127.0.0.1"), 0}) {
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
            tcp::socket socket(io_);
            boost::system::error_code ec;
            acceptor_.accept(socket, ec);
            std::lock_guard lock(mutex_);
            if (ec || stopping_) return;
            auto& kept = sockets_.emplace_back(std::move(socket));
            serving_.emplace_back([this, &kept] { serve(kept); });
        }
    }

    void serve(tcp::socket& socket) {
        boost::beast::flat_buffer buffer;
        for (;;) {
            bhttp::request<bhttp::string_body> request;
            boost::system::error_code ec;
            bhttp::read(socket, buffer, request, ec);
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
            bhttp::response<bhttp::string_body> response(
                mode_ == Mode::ack ? bhttp::status::ok : bhttp::status::service_unavailable, 11);
            response.body() = "{}";
            response.prepare_payload();
            bhttp::write(socket, response, ec);
            if (ec) return;
        }
    }

    Mode mode_;
    asio::io_context io_;
    tcp::acceptor acceptor_;
    std::mutex mutex_;
    std::condition_variable stopped_;
    bool stopping_ = false;
    std::list<tcp::socket> sockets_;
    std::list<std::thread> serving_;
    std::thread accepting_;
    std::atomic<int> applies_{0};
    std::string last_body_;
};

// This replica's stores and a Replicator whose peers are the stand-ins.
struct Writer : test::StoreFixture {
    Writer(std::vector<StandInPeer*> peers, replication::WriteQuorum quorum) {
        replication::Options options;
        for (auto* peer : peers) options.peers.push_back(peer->address());
        options.secret = "a-secret-of-enough-characters";
        options.write_quorum = quorum;
        options.quorum_timeout = std::chrono::milliseconds(300);
        replicator = std::make_unique<replication::Replicator>(options, "writer", blobs, meta, clock, pulls);
    }

    std::unique_ptr<replication::Replicator> replicator;
};

const std::vector<storage::Event> tag_event = {
    {storage::Event::Type::tag, "r", "sha256:" + std::string(64, 'a'), "v1", {7, "writer"}}};

using Mode = StandInPeer::Mode;

}  // namespace

TEST_CASE("quorum reached: the write returns once a majority holds it", "[replication][quorum]") {
    StandInPeer a(Mode::ack), b(Mode::refuse);
    {
        Writer writer({&a, &b}, replication::WriteQuorum::quorum);
        writer.replicator->replicate(tag_event);  // itself and a: two of three
    }
    CHECK(a.applies() == 1);
    CHECK(b.applies() == 1);
    auto pushed = replication::protocol::parse_apply(a.last_body());
    REQUIRE(pushed);
    REQUIRE(pushed->events.size() == 1);
    CHECK(pushed->events[0].tag == "v1");
}

TEST_CASE("quorum not reached: every peer refused, the write fails at once", "[replication][quorum]") {
    StandInPeer a(Mode::refuse), b(Mode::refuse);
    {
        Writer writer({&a, &b}, replication::WriteQuorum::quorum);
        CHECK(code_of([&] { writer.replicator->replicate(tag_event); }) == oci::ErrorCode::unavailable);
    }
    CHECK(a.applies() == 1);
    CHECK(b.applies() == 1);
}

TEST_CASE("quorum timed out: a peer that never answers fails the write", "[replication][quorum]") {
    StandInPeer a(Mode::refuse), b(Mode::stall);
    {
        Writer writer({&a, &b}, replication::WriteQuorum::quorum);
        CHECK(code_of([&] { writer.replicator->replicate(tag_event); }) == oci::ErrorCode::unavailable);
    }                         // waits for the push to the stalled peer to give up
    CHECK(b.applies() == 1);  // it got the events; it only never said so
}

TEST_CASE("write quorum all needs every peer; local asks none", "[replication][quorum]") {
    StandInPeer a(Mode::ack), b(Mode::refuse);
    {
        Writer all({&a, &b}, replication::WriteQuorum::all);
        CHECK(code_of([&] { all.replicator->replicate(tag_event); }) == oci::ErrorCode::unavailable);
    }
    {
        Writer local({&a, &b}, replication::WriteQuorum::local);
        local.replicator->replicate(tag_event);
    }
    CHECK(a.applies() == 1);  // from `all` only
    StandInPeer c(Mode::ack), d(Mode::ack);
    Writer all({&c, &d}, replication::WriteQuorum::all);
    all.replicator->replicate(tag_event);
    CHECK(c.applies() == 1);
    CHECK(d.applies() == 1);
}
