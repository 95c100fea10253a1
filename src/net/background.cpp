#include "berth/net/background.hpp"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace berth::net {

void run_in_background() {
    const auto thread = static_cast<id_t>(::syscall(SYS_gettid));
    errno = 0;
    const int now = ::getpriority(PRIO_PROCESS, thread);
    // Raising one's own nice value needs no privilege; failing to is harmless (it stays as it was).
    if (errno == 0) (void)::setpriority(PRIO_PROCESS, thread, now + background_nice);
}

}  // namespace berth::net
