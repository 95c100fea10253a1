#include <catch2/catch.hpp>
#include <set>

#include "berth/oci/error.hpp"
#include "http/handlers.hpp"
#include "http/router.hpp"

using namespace berth::http;

TEST_CASE("routes are matched from the right, so names may contain route words") {
    auto route = [](const char* target) { return parse_target(target)->route; };
    CHECK(route("/v2/").kind == RouteKind::base);
    CHECK(route("/v2").kind == RouteKind::base);
    CHECK(route("/v2/_catalog").kind == RouteKind::catalog);
    auto tags = route("/v2/a/b/tags/list");
    CHECK(tags.kind == RouteKind::tags);
    CHECK(tags.name == "a/b");
    auto manifest = route("/v2/blobs/manifests/latest");
    CHECK(manifest.kind == RouteKind::manifest);
    CHECK(manifest.name == "blobs");
    CHECK(manifest.reference == "latest");
    CHECK(route("/v2/x/blobs/uploads/").kind == RouteKind::upload_start);
    CHECK(route("/v2/x/blobs/uploads").kind == RouteKind::upload_start);
    auto upload = route("/v2/x/y/blobs/uploads/abc");
    CHECK(upload.kind == RouteKind::upload);
    CHECK(upload.name == "x/y");
    CHECK(upload.reference == "abc");
    auto blob = route("/v2/x/blobs/sha256%3Aab");
    CHECK(blob.kind == RouteKind::blob);
    CHECK(blob.reference == "sha256:ab");
    CHECK(route("/v2/x/referrers/sha256:ab").kind == RouteKind::referrers);
    CHECK(route("/v2/x").kind == RouteKind::unknown);
    CHECK(route("/v2/blobs/uploads/").kind == RouteKind::unknown);  // no repository name (found by fuzzing)
    CHECK(route("/healthz").kind == RouteKind::healthz);
    CHECK(route("/other").kind == RouteKind::unknown);
}

TEST_CASE("the usage endpoint is a user route beside the peer API's paths", "[quotas]") {
    auto usage = parse_target("/_berth/v1/usage?n=2&last=team");
    REQUIRE(usage);
    CHECK(usage->route.kind == RouteKind::usage);
    CHECK(usage->query.get("last") == "team");
    CHECK(parse_target("/_berth/v1/status")->route.kind == RouteKind::peer);
    CHECK(parse_target("/_berth/v1/usage/x")->route.kind == RouteKind::peer);
}

TEST_CASE("an encoded slash stays inside its segment") {
    auto route = parse_target("/v2/a%2Fb/manifests/x")->route;
    CHECK(route.kind == RouteKind::manifest);
    CHECK(route.name == "a/b");  // decoded after splitting; the registry then checks the name
    CHECK_FALSE(parse_target("/v2/a%2/manifests/x"));
    CHECK_FALSE(parse_target("http://host/v2/"));
    CHECK_FALSE(parse_target("*"));
}

TEST_CASE("query parameters decode and repeat") {
    auto target = parse_target("/v2/x/manifests/sha256:a?tag=a&tag=b%2Bc&n=5&empty=&flag")->query;
    CHECK(target.all("tag") == std::vector<std::string>{"a", "b+c"});
    CHECK(target.get("n") == "5");
    CHECK(target.get("empty") == "");
    CHECK(target.get("flag") == "");
    CHECK_FALSE(target.get("missing"));
}

TEST_CASE("Range headers: single ranges served, others ignored, out of bounds refused") {
    auto r = parse_range("bytes=0-0", 10);
    REQUIRE(r);
    CHECK(r->first == 0);
    CHECK(r->length == 1);
    r = parse_range("bytes=5-", 10);
    CHECK((r && r->first == 5 && r->length == 5));
    r = parse_range("bytes=-3", 10);
    CHECK((r && r->first == 7 && r->length == 3));
    r = parse_range("bytes=-30", 10);
    CHECK((r && r->first == 0 && r->length == 10));
    r = parse_range("bytes=2-100", 10);
    CHECK((r && r->first == 2 && r->length == 8));
    CHECK_FALSE(parse_range("bytes=0-1,3-4", 10));
    CHECK_FALSE(parse_range("items=0-1", 10));
    CHECK_FALSE(parse_range("bytes=5-2", 10));
    CHECK_FALSE(parse_range("bytes=a-b", 10));
    CHECK_FALSE(parse_range("bytes=99999999999999999999-", 10));
    CHECK_THROWS_AS(parse_range("bytes=10-", 10), berth::oci::Error);
    CHECK_THROWS_AS(parse_range("bytes=-0", 10), berth::oci::Error);
}

TEST_CASE("Content-Range of upload chunks") {
    auto c = parse_content_range("0-21");
    CHECK((c && c->first == 0 && c->last == 21));
    c = parse_content_range("bytes 22-41/42");
    CHECK((c && c->first == 22 && c->last == 41));
    c = parse_content_range("bytes 22-41/*");
    CHECK((c && c->first == 22 && c->last == 41));
    CHECK_FALSE(parse_content_range("5-4"));
    CHECK_FALSE(parse_content_range("-4"));
    CHECK_FALSE(parse_content_range("x"));
}

#include "http/client_limits.hpp"
#include "http/party_pools.hpp"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

TEST_CASE("per-client connection and request limits") {
    ClientLimits limits(2, 10);
    CHECK(limits.open("a"));
    CHECK(limits.open("a"));
    CHECK_FALSE(limits.open("a"));
    CHECK(limits.open("b"));  // another client is not affected
    limits.close("a");
    CHECK(limits.open("a"));
    int allowed = 0;
    for (int i = 0; i < 100; ++i) allowed += limits.allow_request("a");
    CHECK(allowed == 20);  // the burst is twice the rate
    CHECK(limits.allow_request("b"));
    ClientLimits unlimited(0, 0);
    for (int i = 0; i < 1000; ++i) REQUIRE(unlimited.allow_request("a"));
}

#include <arpa/inet.h>
#include <fstream>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <utility>

#include "http/congestion.hpp"

namespace {
struct Fd {
    int fd;
    explicit Fd(int f) : fd(f) { REQUIRE(fd >= 0); }
    Fd(Fd&& other) noexcept : fd(std::exchange(other.fd, -1)) {}
    Fd(const Fd&) = delete;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

// A listener on 127.0.0.1 with a port the kernel picks; not yet listening.
Fd loopback_socket() {
    Fd s(::socket(AF_INET, SOCK_STREAM, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(s.fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    return s;
}

// Connects to the listener and returns the accepted socket.
Fd accept_one(const Fd& listener, Fd& client) {
    sockaddr_in a{};
    socklen_t n = sizeof a;
    REQUIRE(::getsockname(listener.fd, reinterpret_cast<sockaddr*>(&a), &n) == 0);
    REQUIRE(::connect(client.fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    return Fd(::accept(listener.fd, nullptr, nullptr));
}
}  // namespace

TEST_CASE("same-host connections get their congestion control from the listener") {
    Fd probe(::socket(AF_INET, SOCK_STREAM, 0));
    const auto system = congestion_control(probe.fd);
    REQUIRE_FALSE(system.empty());
    // reno may always be chosen; on a host already using it, try the others.
    std::string other;
    std::ifstream available("/proc/sys/net/ipv4/tcp_available_congestion_control");
    for (std::string name = "reno"; !name.empty(); name.clear(), available >> name)
        if (name != system && set_congestion_control(probe.fd, name)) {
            other = name;
            break;
        }
    if (other.empty()) {
        WARN("no congestion control other than " << system << " may be set here");
        return;
    }

    SECTION("a loopback listener: accepted sockets inherit the same-host choice") {
        auto listener = loopback_socket();
        SameHostCongestion congestion;
        CHECK(congestion.configure_listener(listener.fd, other, true).empty());
        REQUIRE(::listen(listener.fd, 4) == 0);
        Fd client(::socket(AF_INET, SOCK_STREAM, 0));
        auto accepted = accept_one(listener, client);
        CHECK(congestion_control(accepted.fd) == other);
        congestion.accepted(accepted.fd, false);  // cannot be another host's: nothing to undo
        CHECK(congestion_control(accepted.fd) == other);
    }
    SECTION("a listener on every address: another host's connection goes back to the system's") {
        auto listener = loopback_socket();
        SameHostCongestion congestion;
        CHECK(congestion.configure_listener(listener.fd, other, false).empty());
        REQUIRE(::listen(listener.fd, 4) == 0);
        Fd client(::socket(AF_INET, SOCK_STREAM, 0)), client2(::socket(AF_INET, SOCK_STREAM, 0));
        auto same_host = accept_one(listener, client);
        congestion.accepted(same_host.fd, true);
        CHECK(congestion_control(same_host.fd) == other);
        auto remote = accept_one(listener, client2);
        congestion.accepted(remote.fd, false);
        CHECK(congestion_control(remote.fd) == system);
    }
    SECTION("turned off, or refused by the kernel: the system's choice everywhere") {
        auto listener = loopback_socket();
        SameHostCongestion congestion;
        CHECK(congestion.configure_listener(listener.fd, "", true).empty());
        CHECK(congestion_control(listener.fd) == system);
        auto refused = congestion.configure_listener(listener.fd, "no_such_cc", false);
        CHECK(refused.find("no_such_cc") != std::string::npos);
        CHECK(congestion_control(listener.fd) == system);
        REQUIRE(::listen(listener.fd, 4) == 0);
        Fd client(::socket(AF_INET, SOCK_STREAM, 0));
        auto accepted = accept_one(listener, client);
        congestion.accepted(accepted.fd, false);
        CHECK(congestion_control(accepted.fd) == system);
    }
}

TEST_CASE("a party's pool takes what its queue holds and refuses the rest") {
    std::mutex mutex;
    std::condition_variable released;
    bool open = false;
    std::atomic<int> ran{0}, started{0};
    {
        berth::http::PartyPools pools(1, 2);
        auto hold = [&](auto) {
            ++started;
            std::unique_lock lock(mutex);
            released.wait(lock, [&] { return open; });
            ++ran;
        };
        REQUIRE(pools.post("upstream:a", hold));  // runs, and holds the only thread
        // Wait until it has left the queue, so the queue's two places are free.
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (started == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
        REQUIRE(pools.post("upstream:a", hold));
        REQUIRE(pools.post("upstream:a", hold));
        CHECK_FALSE(pools.post("upstream:a", hold));            // full: the caller answers at once
        CHECK(pools.post("upstream:b", [&](auto) { ++ran; }));  // another party is not held up
        {
            std::lock_guard lock(mutex);
            open = true;
        }
        released.notify_all();
        deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (ran < 4 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
        CHECK(ran == 4);
        pools.stop();
        CHECK_FALSE(pools.post("upstream:a", hold));  // stopped: nothing more is taken
    }
}

TEST_CASE("every route kind has its own metrics label") {
    std::set<std::string_view> labels;
    for (int kind = 0; kind <= static_cast<int>(RouteKind::unknown); ++kind)
        CHECK(labels.insert(route_label(static_cast<RouteKind>(kind))).second);
    CHECK(route_label(RouteKind::manifest) == "manifest");
    CHECK(route_label(RouteKind::unknown) == "unknown");
}
