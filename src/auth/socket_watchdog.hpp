#pragma once
// Shuts a blocking client's socket down when the step it is in overruns its time. libldap retries
// a TLS handshake whose read timed out, and waits in blocking reads a socket timeout cannot end,
// so a directory that accepts a connection and then stops answering (frozen, or a black hole past
// a load balancer) would hold a login for ever; shut down, the socket fails the step at once.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>

namespace berth::auth {

class SocketWatchdog {
public:
    using Clock = std::chrono::steady_clock;
    SocketWatchdog() = default;
    ~SocketWatchdog();
    SocketWatchdog(const SocketWatchdog&) = delete;
    SocketWatchdog& operator=(const SocketWatchdog&) = delete;

    // Watches fd until forget(id): shut down once deadline passes unless renewed before.
    std::uint64_t watch(int fd, Clock::time_point deadline);
    void renew(std::uint64_t id, Clock::time_point deadline);
    // Before the socket is closed: after this, the watchdog never touches fd again.
    void forget(std::uint64_t id);

private:
    void run();
    struct Watched {
        int fd;
        Clock::time_point deadline;
    };
    std::mutex mutex_;
    std::condition_variable changed_;
    std::map<std::uint64_t, Watched> watched_;
    std::uint64_t next_id_ = 1;
    bool stopping_ = false;
    std::thread thread_;  // started with the first socket watched
};

}  // namespace berth::auth
