#include "socket_watchdog.hpp"

#include <sys/socket.h>

#include <algorithm>

namespace berth::auth {

SocketWatchdog::~SocketWatchdog() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    changed_.notify_all();
    if (thread_.joinable()) thread_.join();
}

std::uint64_t SocketWatchdog::watch(int fd, Clock::time_point deadline) {
    std::lock_guard lock(mutex_);
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
    const auto id = next_id_++;
    watched_[id] = {fd, deadline};
    changed_.notify_all();
    return id;
}

void SocketWatchdog::renew(std::uint64_t id, Clock::time_point deadline) {
    std::lock_guard lock(mutex_);
    if (auto it = watched_.find(id); it != watched_.end()) it->second.deadline = deadline;
    changed_.notify_all();
}

void SocketWatchdog::forget(std::uint64_t id) {
    std::lock_guard lock(mutex_);
    watched_.erase(id);
}

void SocketWatchdog::run() {
    std::unique_lock lock(mutex_);
    while (!stopping_) {
        auto next = Clock::time_point::max();
        for (auto& [id, watched] : watched_) next = std::min(next, watched.deadline);
        changed_.wait_until(lock, next);
        const auto now = Clock::now();
        // Under the lock forget() takes before the socket is closed: fd is still this socket.
        for (auto it = watched_.begin(); it != watched_.end();)
            if (it->second.deadline <= now) {
                ::shutdown(it->second.fd, SHUT_RDWR);
                it = watched_.erase(it);
            } else {
                ++it;
            }
    }
}

}  // namespace berth::auth
