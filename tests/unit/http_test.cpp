#include <catch2/catch.hpp>
#include <set>

#include "berth/oci/error.hpp"
#include "http/ranges.hpp"
#include "http/router.hpp"

using namespace berth::http;

namespace {

std::string_view label_of(const char* target) { return parse_target(target)->route->label; }

}  // namespace

TEST_CASE("routes are matched from the right, so names may contain route words") {
    CHECK(label_of("/v2/") == "base");
    CHECK(label_of("/v2") == "base");
    CHECK(label_of("/v2/_catalog") == "catalog");
    auto tags = *parse_target("/v2/a/b/tags/list");
    CHECK(tags.route->label == "tags");
    CHECK(tags.name == "a/b");
    auto manifest = *parse_target("/v2/blobs/manifests/latest");
    CHECK(manifest.route->label == "manifest");
    CHECK(manifest.name == "blobs");
    CHECK(manifest.reference == "latest");
    CHECK(label_of("/v2/x/blobs/uploads/") == "upload_start");
    CHECK(label_of("/v2/x/blobs/uploads") == "upload_start");
    auto upload = *parse_target("/v2/x/y/blobs/uploads/abc");
    CHECK(upload.route->label == "upload");
    CHECK(upload.name == "x/y");
    CHECK(upload.reference == "abc");
    auto blob = *parse_target("/v2/x/blobs/sha256%3Aab");
    CHECK(blob.route->label == "blob");
    CHECK(blob.reference == "sha256:ab");
    CHECK(label_of("/v2/x/referrers/sha256:ab") == "referrers");
    CHECK(label_of("/v2/x") == "unknown");
    CHECK(label_of("/v2/blobs/uploads/") == "unknown");  // no repository name (found by fuzzing)
    CHECK(label_of("/healthz") == "healthz");
    CHECK(label_of("/other") == "unknown");
}

TEST_CASE("the usage endpoint is a user route beside the peer API's paths", "[quotas]") {
    auto usage = parse_target("/_berth/v1/usage?n=2&last=team");
    REQUIRE(usage);
    CHECK(usage->route->label == "usage");
    CHECK(usage->query.get("last") == "team");
    CHECK(label_of("/_berth/v1/status") == "peer");
    CHECK(parse_target("/_berth/v1/status")->reference == "status");
    CHECK(label_of("/_berth/v1/usage/x") == "peer");
}

TEST_CASE("the access question names its repository in the query") {
    auto access = parse_target("/_berth/v1/access?repository=team%2Fapp");
    CHECK(access->route->label == "access");
    CHECK(access->name == "team/app");
    CHECK(access->route->names_repository());
}

TEST_CASE("the web UI's paths are one label, its files the rest") {
    CHECK(label_of("/ui") == "ui");
    auto index = *parse_target("/ui/");
    CHECK(index.route->handler == parse_target("/ui/app.js")->route->handler);
    CHECK(index.reference.empty());
    CHECK(parse_target("/ui/app.js")->reference == "app.js");
    CHECK(parse_target("/ui/api/whoami")->route->auth == Auth::ui);
    CHECK(parse_target("/ui/api/nothing")->route->auth == Auth::ui);  // no such view, once the caller is known
}

TEST_CASE("an encoded slash stays inside its segment") {
    auto target = *parse_target("/v2/a%2Fb/manifests/x");
    CHECK(target.route->label == "manifest");
    CHECK(target.name == "a/b");  // decoded after splitting: the same name as /v2/a/b/
    CHECK_NOTHROW(require_valid_parts(target, false));
    // What decodes to no valid name is refused before anything builds a path from it.
    CHECK_THROWS_AS(require_valid_parts(*parse_target("/v2/a%2F..%2Fb/manifests/x"), false), berth::oci::Error);
    CHECK_FALSE(parse_target("/v2/a%2/manifests/x"));
    CHECK_FALSE(parse_target("http://host/v2/"));
    CHECK_FALSE(parse_target("*"));
}

TEST_CASE("parts meet their grammar before anything sees them") {
    using berth::oci::ErrorCode;
    auto code_of = [](const char* path, bool put) -> std::optional<ErrorCode> {
        try {
            require_valid_parts(*parse_target(path), put);
        } catch (const berth::oci::Error& error) {
            return error.code();
        }
        return std::nullopt;
    };
    CHECK_FALSE(code_of("/v2/a/manifests/v1", true));
    CHECK(code_of("/v2/a/manifests/-bad", true) == ErrorCode::tag_invalid);
    CHECK(code_of("/v2/a/manifests/-bad", false) == ErrorCode::manifest_unknown);
    CHECK(code_of("/v2/a/manifests/sha256:zz", false) == ErrorCode::digest_invalid);
    CHECK(code_of("/v2/a/blobs/latest", false) == ErrorCode::digest_invalid);
    CHECK(code_of("/v2/a/blobs/uploads/..%2Fx", false) == ErrorCode::blob_upload_unknown);
    CHECK(code_of("/v2/A/tags/list", false) == ErrorCode::name_invalid);
}

TEST_CASE("the route table: the unknown row last, peers read only blobs and manifests") {
    const auto table = routes();
    CHECK(table.back().pattern.empty());
    CHECK(&unknown_route() == &table.back());
    for (const auto& route : table) {
        INFO(route.pattern);
        CHECK(route.handler != nullptr);
        CHECK_FALSE(route.label.empty());
        if (route.has(peer_reads)) CHECK((route.label == "blob" || route.label == "manifest"));
        if (route.has(agent)) CHECK(route.auth != Auth::peer);
        if (route.part != Part::none) CHECK(route.names_repository());
    }
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

TEST_CASE("rows share a metrics label only when they are one resource (the web UI)") {
    std::set<std::string_view> labels;
    for (const auto& route : routes())
        if (!labels.insert(route.label).second) CHECK(route.has(ui));
    CHECK(labels.count("manifest"));
    CHECK(labels.count("unknown"));
}
