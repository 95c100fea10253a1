// Passing an upload request to the replica that owns its session. Plain
// blocking sockets: the body is sent on as it arrives, from a thread of the
// request's own, and the answer relayed.
#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "handlers.hpp"

namespace berth::http {
namespace {

class Forward {
public:
    Forward(const std::string& address, const std::string& secret, const Request& request, const std::string& method,
            const std::string& target) {
        auto colon = address.rfind(':');
        auto host = address.substr(0, colon);
        if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
        addrinfo hints{};
        hints.ai_socktype = SOCK_STREAM;
        addrinfo* result = nullptr;
        if (getaddrinfo(host.c_str(), address.substr(colon + 1).c_str(), &hints, &result) != 0 || !result)
            throw oci::Error(oci::ErrorCode::unavailable, "the replica owning this upload cannot be resolved");
        fd_ = ::socket(result->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        timeval timeout{30, 0};
        ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
        ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
        int rc = ::connect(fd_, result->ai_addr, result->ai_addrlen);
        freeaddrinfo(result);
        if (rc != 0) {
            ::close(fd_);
            fd_ = -1;
            throw oci::Error(oci::ErrorCode::unavailable, "the replica owning this upload is unreachable");
        }
        chunked_ = request.has_body && !request.content_length;
        std::string head = method + " " + target + " HTTP/1.1\r\nHost: " + address +
                           "\r\nBerth-Peer-Secret: " + secret + "\r\nBerth-Forwarded: 1\r\nConnection: close\r\n";
        if (!request.content_type.empty()) head += "Content-Type: " + request.content_type + "\r\n";
        if (!request.content_range.empty()) head += "Content-Range: " + request.content_range + "\r\n";
        if (chunked_) head += "Transfer-Encoding: chunked\r\n";
        else head += "Content-Length: " + std::to_string(request.content_length.value_or(0)) + "\r\n";
        send(head + "\r\n");
    }

    ~Forward() {
        if (fd_ >= 0) ::close(fd_);
    }

    void write(const char* data, std::size_t size) {
        if (size == 0) return;
        if (chunked_) {
            char line[32];
            std::snprintf(line, sizeof line, "%zx\r\n", size);
            send(line);
        }
        send(std::string_view(data, size));
        if (chunked_) send("\r\n");
        sent_ += size;
    }

    std::uint64_t offset() const { return sent_; }

    Response finish() {
        if (chunked_) send("0\r\n\r\n");
        std::string raw;
        char buffer[16384];
        while (raw.size() < (8 << 20)) {
            auto n = ::recv(fd_, buffer, sizeof buffer, 0);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
            raw.append(buffer, static_cast<std::size_t>(n));
        }
        return parse(raw);
    }

private:
    void send(std::string_view bytes) {
        while (!bytes.empty()) {
            auto n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) throw oci::Error(oci::ErrorCode::unavailable, "lost the replica owning this upload");
            bytes.remove_prefix(static_cast<std::size_t>(n));
        }
    }

    // The owner is berth itself, answering with Content-Length and Connection: close.
    static Response parse(const std::string& raw) {
        auto end = raw.find("\r\n\r\n");
        if (raw.size() < 12 || end == std::string::npos)
            throw oci::Error(oci::ErrorCode::unavailable, "no answer from the replica owning this upload");
        Response response{std::atoi(raw.c_str() + 9), {}, raw.substr(end + 4), {}, {}};
        std::size_t line = raw.find("\r\n") + 2;
        while (line < end) {
            auto next = raw.find("\r\n", line);
            auto colon = raw.find(':', line);
            if (colon != std::string::npos && colon < next) {
                auto name = raw.substr(line, colon - line);
                auto value = raw.substr(colon + 1, next - colon - 1);
                while (!value.empty() && value.front() == ' ') value.erase(0, 1);
                for (auto relayed : {"Location", "Range", "Docker-Upload-UUID", "Docker-Content-Digest", "Content-Type"})
                    if (strcasecmp(name.c_str(), relayed) == 0) response.set(relayed, value);
            }
            line = next + 2;
        }
        return response;
    }

    int fd_ = -1;
    bool chunked_ = false;
    std::uint64_t sent_ = 0;
};

// Sends each piece on a thread of its own, so that an owner that stops reading
// holds up neither the I/O thread nor the other connections it serves. One
// buffer fills from the client while the other is sent.
class ForwardSink : public BodySink {
public:
    // The session releases the sink before finish; the shared pointer keeps the socket.
    explicit ForwardSink(std::shared_ptr<Forward> forward)
        : forward_(std::move(forward)), fill_(piece_bytes), send_(piece_bytes), sender_([this] { run(); }) {}

    ~ForwardSink() override {  // on a worker: waits for the piece in flight (the socket has a timeout)
        std::function<void()> dropped;
        {
            std::lock_guard lock(mutex_);
            stopping_ = true;
            dropped = std::move(resume_);
        }
        changed_.notify_all();
        sender_.join();
    }

    std::span<char> buffer(std::function<void()> resume) override {
        std::lock_guard lock(mutex_);
        if (sending_ && !error_) {
            resume_ = std::move(resume);
            return {};
        }
        return fill_;  // after an error too: commit reports it
    }

    void commit(std::size_t size) override {
        std::lock_guard lock(mutex_);
        if (error_) std::rethrow_exception(error_);
        if (size == 0) return;
        std::swap(fill_, send_);
        send_size_ = size;
        sending_ = true;
        committed_ += size;
        changed_.notify_all();
    }

    std::uint64_t offset() const override { return committed_; }

private:
    static constexpr std::size_t piece_bytes = 256 * 1024;

    void run() {
        std::unique_lock lock(mutex_);
        for (;;) {
            changed_.wait(lock, [this] { return sending_ || stopping_; });
            if (!sending_) return;
            lock.unlock();
            std::exception_ptr error;
            try {
                forward_->write(send_.data(), send_size_);
            } catch (...) {
                error = std::current_exception();
            }
            lock.lock();
            sending_ = false;
            if (error) error_ = error;
            if (auto wake = std::exchange(resume_, nullptr)) {
                lock.unlock();
                wake();
                lock.lock();
            }
        }
    }

    std::shared_ptr<Forward> forward_;
    std::mutex mutex_;
    std::condition_variable changed_;
    std::vector<char> fill_, send_;  // the I/O thread's, the sender's
    std::size_t send_size_ = 0;
    bool sending_ = false, stopping_ = false;
    std::exception_ptr error_;
    std::function<void()> resume_;
    std::uint64_t committed_ = 0;  // the I/O thread's only
    std::thread sender_;
};

}  // namespace

Plan plan_forward(const std::string& address, const std::string& secret, Request& request, const std::string& method,
                  const std::string& target) {
    auto forward = std::make_shared<Forward>(address, secret, request, method, target);
    Plan plan;
    if (request.has_body) {
        plan.body = Plan::Body::stream;
        plan.sink = std::make_unique<ForwardSink>(forward);
    }
    plan.finish = [forward](std::string&, std::uint64_t) { return forward->finish(); };
    return plan;
}

}  // namespace berth::http
