// berth::net's start-up connection checks against real sockets on 127.0.0.1.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <string>

#include "berth/net/connect.hpp"
#include "berth/net/resolve.hpp"

using namespace berth::net;
using namespace std::chrono_literals;

namespace {

// A loopback socket bound to a port of its own, listening or not.
struct Listener {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};

    Listener() {
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t length = sizeof address;
        REQUIRE(fd >= 0);
        REQUIRE(::bind(fd, any(), sizeof address) == 0);
        REQUIRE(::getsockname(fd, any(), &length) == 0);
    }
    ~Listener() { ::close(fd); }
    sockaddr* any() { return reinterpret_cast<sockaddr*>(&address); }
    std::string named() const { return "127.0.0.1:" + std::to_string(ntohs(address.sin_port)); }
};

// The number the next descriptor would get: unchanged after a call that closed all it opened.
int lowest_free_descriptor() {
    const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    ::close(fd);
    return fd;
}

}  // namespace

TEST_CASE("connect_within hands over a connected non-blocking descriptor, or -1 where nothing listens", "[net]") {
    Listener listener;
    const int free_before = lowest_free_descriptor();

    // Bound but not listening: the kernel refuses at once, well inside the deadline.
    CHECK(connect_within(listener.any(), sizeof listener.address, 5s) == -1);
    CHECK_FALSE(accepts_connections(listener.named(), 5s));
    CHECK(lowest_free_descriptor() == free_before);

    REQUIRE(::listen(listener.fd, SOMAXCONN) == 0);
    const int fd = connect_within(listener.any(), sizeof listener.address, 5s);
    REQUIRE(fd >= 0);
    CHECK((::fcntl(fd, F_GETFL) & O_NONBLOCK) != 0);
    CHECK((::fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
    sockaddr_in peer{};
    socklen_t peer_length = sizeof peer;
    CHECK(::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_length) == 0);
    CHECK(peer.sin_port == listener.address.sin_port);
    ::close(fd);
    CHECK(accepts_connections(listener.named(), 5s));
    CHECK(lowest_free_descriptor() == free_before);
}

TEST_CASE("connect_within waits out its deadline where the peer never answers, through signals", "[net]") {
    Listener listener;
    // With its accept queue full (backlog 1 holds two on Linux; kernels differ on whether 0 holds
    // one) the listener drops further SYNs, as a firewall would, and a connect can only wait.
    REQUIRE(::listen(listener.fd, 1) == 0);
    const int first = connect_within(listener.any(), sizeof listener.address, 5s);
    const int second = connect_within(listener.any(), sizeof listener.address, 5s);
    REQUIRE(first >= 0);
    REQUIRE(second >= 0);
    // A client counts as connected once the SYN-ACK arrives, possibly before its connection is
    // queued; wait until it is, or a third could still find room.
    pollfd queued{listener.fd, POLLIN, 0};
    REQUIRE(::poll(&queued, 1, 5000) == 1);
    const int free_before = lowest_free_descriptor();

    // A signal every 50 ms while it waits: each one interrupts poll, and none may end the wait.
    struct sigaction ignore {};
    ignore.sa_handler = [](int) {};
    struct sigaction before {};
    REQUIRE(::sigaction(SIGALRM, &ignore, &before) == 0);
    itimerval every_50ms{{0, 50'000}, {0, 50'000}};
    REQUIRE(::setitimer(ITIMER_REAL, &every_50ms, nullptr) == 0);
    const auto start = std::chrono::steady_clock::now();
    const int fd = connect_within(listener.any(), sizeof listener.address, 400ms);
    const auto waited = std::chrono::steady_clock::now() - start;
    itimerval off{};
    CHECK(::setitimer(ITIMER_REAL, &off, nullptr) == 0);
    CHECK(::sigaction(SIGALRM, &before, nullptr) == 0);

    CHECK(fd == -1);
    CHECK(waited >= 400ms);
    CHECK(waited < 4s);
    CHECK(lowest_free_descriptor() == free_before);
    ::close(first);
    ::close(second);
}
