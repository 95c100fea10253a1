// berth-notify-receiver: bench/notify's live receiver. It stands in for a receiver on another
// machine, so it must cost next to nothing on this one: plain blocking sockets, a thread per
// connection (berth keeps one open per endpoint), and no parsing beyond the request's framing and
// the event's "time". Answers 204 to every POST and appends, per event, its arrival time minus
// the event's own time (seconds) to the file named by its argument. Prints its port, then serves
// until killed.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>
#include <thread>

namespace {

std::mutex out_mutex;
FILE* out = nullptr;

double now_seconds() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// "2026-11-28T04:05:06.123Z" (RFC 3339 in UTC, as berth writes it) as seconds since the epoch.
bool parse_time(const std::string& text, double& seconds) {
    std::tm tm{};
    int millis = 0;
    if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                    &tm.tm_min, &tm.tm_sec, &millis) < 6)
        return false;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    seconds = static_cast<double>(timegm(&tm)) + millis / 1000.0;
    return true;
}

void record(const std::string& body, double arrived) {
    static const std::string key = "\"time\":\"";
    for (auto at = body.find(key); at != std::string::npos; at = body.find(key, at + 1)) {
        double decided = 0;
        if (!parse_time(body.substr(at + key.size(), 24), decided)) continue;
        std::lock_guard lock(out_mutex);
        std::fprintf(out, "%.6f\n", arrived - decided);
        std::fflush(out);
    }
}

void serve(int fd) {
    std::string buffer;
    char chunk[65536];
    for (;;) {
        auto end = buffer.find("\r\n\r\n");
        while (end == std::string::npos) {
            const auto n = ::read(fd, chunk, sizeof chunk);
            if (n <= 0) return ::close(fd), void();
            buffer.append(chunk, static_cast<std::size_t>(n));
            end = buffer.find("\r\n\r\n");
        }
        std::size_t length = 0;
        for (const char* name : {"Content-Length:", "content-length:"})
            if (auto at = buffer.find(name); at != std::string::npos && at < end)
                length = std::strtoull(buffer.c_str() + at + std::strlen(name), nullptr, 10);
        while (buffer.size() < end + 4 + length) {
            const auto n = ::read(fd, chunk, sizeof chunk);
            if (n <= 0) return ::close(fd), void();
            buffer.append(chunk, static_cast<std::size_t>(n));
        }
        const double arrived = now_seconds();
        record(buffer.substr(end + 4, length), arrived);
        buffer.erase(0, end + 4 + length);
        static const char answer[] = "HTTP/1.1 204 No Content\r\n\r\n";
        if (::write(fd, answer, sizeof answer - 1) < 0) return ::close(fd), void();
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: berth-notify-receiver LAGS-FILE\n");
        return 2;
    }
    out = std::fopen(argv[1], "a");
    const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof address;
    if (!out || listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&address), size) != 0 ||
        ::listen(listener, 64) != 0 || ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
        std::perror("berth-notify-receiver");
        return 1;
    }
    std::printf("%d\n", ntohs(address.sin_port));
    std::fflush(stdout);
    for (;;) {
        const int fd = ::accept(listener, nullptr, nullptr);
        if (fd < 0) continue;
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        std::thread(serve, fd).detach();
    }
}
