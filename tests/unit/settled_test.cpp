// How long events wait for peers (notify/settled.hpp, Replicator::heard_until_ms): a peer that stops
// answering holds them until it has failed for a while; a replica catching up, or whose peers DNS has
// not named yet, holds them all.
#include <boost/asio/ip/tcp.hpp>
#include <catch2/catch.hpp>
#include <thread>

#include "berth/replication/replicator.hpp"
#include "fixtures.hpp"
#include "notify/settled.hpp"
#include "stand_in_peer.hpp"

using namespace berth;
using namespace std::chrono_literals;

namespace {

// HOST:PORT where nothing listens: connections are refused at once.
std::string closed_address() {
    boost::asio::io_context io;
    boost::asio::ip::tcp::acceptor acceptor(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
    return "127.0.0.1:" + std::to_string(acceptor.local_endpoint().port());
}

struct Follower : test::StoreFixture {
    explicit Follower(std::vector<std::string> peers, std::string peer_dns = "") {
        replication::Options options;
        options.peers = std::move(peers);
        options.peer_dns = std::move(peer_dns);
        options.secret = "a-secret-of-enough-characters";
        replicator = std::make_unique<replication::Replicator>(options, "self", blobs, meta, clock, pulls);
    }
    std::uint64_t errors() const { return replicator->status().peers.at(0).errors; }
    // Until `done` holds, for at most 10 s.
    template <typename Done>
    void poll(Done done) const {
        for (auto deadline = std::chrono::steady_clock::now() + 10s; !done();) {
            REQUIRE(std::chrono::steady_clock::now() < deadline);
            std::this_thread::sleep_for(10ms);
        }
    }
    // Until the peer has failed `n` times (each failure is followed by a second's pause).
    void await_errors(std::uint64_t n) const {
        poll([&] { return errors() >= n; });
    }

    std::unique_ptr<replication::Replicator> replicator;
};

// A cluster whose readiness and peers' word the test sets.
class StandInCluster final : public replication::Cluster {
public:
    bool catching = false;
    std::uint64_t heard = 0;

    const std::string& self_id() const override { return id_; }
    std::optional<std::string> owner_of(std::string_view) const override { return std::nullopt; }
    bool leads(std::string_view) const override { return !catching; }
    std::optional<std::string> address_of(const std::string&) const override { return std::nullopt; }
    std::unique_ptr<net::Exchange> open_peer(const std::string&, net::RequestHead) const override { return nullptr; }
    net::Response ask_peer(const std::string&, net::RequestHead, std::size_t) const override { return {}; }
    std::vector<std::string> peer_addresses() const override { return {}; }
    std::uint64_t heard_until_ms(std::chrono::milliseconds) const override { return heard; }
    bool catching_up(std::chrono::milliseconds) const override { return catching; }

private:
    std::string id_ = "self";
};

}  // namespace

TEST_CASE("a peer that stops answering holds events back until it has failed for gone_after", "[settled]") {
    Follower follower({closed_address()});
    CHECK(follower.replicator->heard_until_ms(1h) == 0);  // never read: held
    follower.replicator->start();
    follower.await_errors(1);
    CHECK(follower.replicator->heard_until_ms(1h) == 0);  // failing for less than an hour: still held
    const auto before = notify::wall_ms();
    CHECK(follower.replicator->heard_until_ms(0ms) >= before);  // gone: no longer counted
    follower.replicator->stop();
}

TEST_CASE("a peer that answers and then cannot be read counts as gone from its first failure", "[settled]") {
    test::StandInPeer peer(test::StandInPeer::Mode::garbage);
    Follower follower({peer.address()});
    follower.replicator->start();
    follower.await_errors(1);
    const auto first_failure = std::chrono::steady_clock::now();
    follower.await_errors(3);  // answered twice more since, each time with a page that does not parse
    const auto failing_for =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - first_failure);
    CHECK(follower.replicator->heard_until_ms(1h) == 0);
    // Polled: between a failure and the next, the peer's answer counts it reachable for a moment.
    follower.poll([&] { return follower.replicator->heard_until_ms(failing_for) > 0; });
    follower.replicator->stop();
}

TEST_CASE("a replica catches up with its peers, but not with one gone or one it cannot understand", "[settled]") {
    Follower gone({closed_address()});
    CHECK(gone.replicator->catching_up(0ms));  // not started
    gone.replicator->start();
    gone.await_errors(1);
    CHECK(gone.replicator->catching_up(1h));  // failing for less: it may be starting
    CHECK_FALSE(gone.replicator->catching_up(0ms));
    gone.replicator->stop();

    test::StandInPeer refused(test::StandInPeer::Mode::incompatible);
    Follower misunderstood({refused.address()});
    misunderstood.replicator->start();
    misunderstood.poll([&] { return !misunderstood.replicator->status().peers.at(0).incompatible.empty(); });
    CHECK_FALSE(misunderstood.replicator->catching_up(1h));
    misunderstood.replicator->stop();
}

TEST_CASE("a replica whose peers DNS has not named yet holds every event", "[settled]") {
    Follower by_dns({}, "peers.berth.invalid");
    CHECK(by_dns.replicator->heard_until_ms(0ms) == 0);
    Follower alone({});
    CHECK(alone.replicator->heard_until_ms(0ms) > 0);
}

TEST_CASE("events wait while a replica catches up, however long, and for peers not heard since it started",
          "[settled]") {
    StandInCluster cluster;
    const auto long_ago = std::chrono::steady_clock::now() - 1h;
    const auto settle = 250ms;

    cluster.catching = true;
    cluster.heard = notify::wall_ms();
    CHECK(notify::settled_before(&cluster, settle, long_ago) == 0);

    cluster.catching = false;
    cluster.heard = 0;
    CHECK(notify::settled_before(&cluster, settle, std::chrono::steady_clock::now()) == 0);
    // Past the hold since its start, a peer never heard holds events back max_hold_ms at most.
    const auto floor = notify::wall_ms() - notify::max_hold_ms - 250;
    const auto settled = notify::settled_before(&cluster, settle, long_ago);
    CHECK(settled >= floor);
    CHECK(settled <= notify::wall_ms() - notify::max_hold_ms);

    cluster.heard = notify::wall_ms() - 1000;
    CHECK(notify::settled_before(&cluster, settle, long_ago) == cluster.heard - 250);
}
