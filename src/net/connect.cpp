#include "berth/net/connect.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>

namespace berth::net {

int connect_within(const sockaddr* address, socklen_t length, std::chrono::milliseconds timeout) {
    using namespace std::chrono;
    int fd = ::socket(address->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (::connect(fd, address, length) != 0 && errno != EINPROGRESS) {
        ::close(fd);
        return -1;
    }
    // Capped so the sum cannot overflow: a year is as good as forever for a connect.
    const auto deadline = steady_clock::now() + std::clamp<milliseconds>(timeout, milliseconds(0), hours(24 * 365));
    for (;;) {
        // Rounded up, so the last fraction of a millisecond is slept, not spun on poll(0); in
        // pieces poll's int can hold. An early wake-up (a signal, or poll's own rounding) waits again.
        const auto left = std::max<milliseconds::rep>(ceil<milliseconds>(deadline - steady_clock::now()).count(), 0);
        pollfd wait{fd, POLLOUT, 0};
        const int ready = ::poll(&wait, 1, static_cast<int>(std::min<milliseconds::rep>(left, INT_MAX)));
        if ((ready < 0 && errno == EINTR) || (ready == 0 && steady_clock::now() < deadline)) continue;
        int error = 0;
        socklen_t error_length = sizeof error;
        if (ready == 1 && (wait.revents & POLLOUT) &&
            ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &error_length) == 0 && error == 0)
            return fd;
        ::close(fd);
        return -1;
    }
}

}  // namespace berth::net
