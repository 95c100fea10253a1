// Passing an upload request to the replica that owns its session, over
// berth's HTTP client. The body streams on as it arrives: the session fills one
// buffer while the client writes the other, and reads from the socket only
// once there is room, so an owner that stops reading holds up this request
// alone, never a thread or the I/O thread's other connections.
#include <condition_variable>
#include <mutex>

#include "berth/net/client.hpp"
#include "berth/replication/peer_service.hpp"
#include "berth/replication/protocol.hpp"
#include "responses.hpp"

namespace berth::http {
namespace {

namespace protocol = replication::protocol;

constexpr std::size_t piece_bytes = 256 * 1024;
constexpr std::size_t max_answer_bytes = 1 << 20;

// What went wrong between here and the owner is the owner being unavailable to the client.
[[noreturn]] void lost(std::exception_ptr error) {
    try {
        std::rethrow_exception(error);
    } catch (const oci::Error&) {
        throw;
    } catch (const std::exception& failure) {
        throw oci::Error(oci::ErrorCode::unavailable, "lost the replica owning this upload", failure.what());
    }
}

// What the sink and the client's callbacks share; outlives whichever goes first.
struct Pipe {
    std::unique_ptr<net::Exchange> exchange;
    std::mutex mutex;
    std::condition_variable written;
    std::vector<char> fill = std::vector<char>(piece_bytes), send = std::vector<char>(piece_bytes);
    bool sending = false;
    std::exception_ptr error;
    std::function<void()> resume;

    void wait_written() {
        std::unique_lock lock(mutex);
        written.wait(lock, [&] { return !sending; });
        if (error) std::rethrow_exception(error);
    }
};

class ForwardSink : public BodySink {
public:
    explicit ForwardSink(std::shared_ptr<Pipe> pipe) : pipe_(std::move(pipe)) {}

    std::span<char> buffer(std::function<void()> resume) override {
        std::lock_guard lock(pipe_->mutex);
        if (pipe_->sending && !pipe_->error) {
            pipe_->resume = std::move(resume);
            return {};
        }
        return pipe_->fill;  // after an error too: commit reports it
    }

    void commit(std::size_t size) override {
        std::lock_guard lock(pipe_->mutex);
        if (pipe_->error) lost(pipe_->error);
        if (size == 0) return;
        std::swap(pipe_->fill, pipe_->send);
        pipe_->sending = true;
        committed_ += size;
        pipe_->exchange->async_write({pipe_->send.data(), size}, [pipe = pipe_](std::exception_ptr error) {
            std::function<void()> wake;
            {
                std::lock_guard lock(pipe->mutex);
                pipe->sending = false;
                if (error) pipe->error = error;
                wake = std::exchange(pipe->resume, nullptr);
            }
            pipe->written.notify_all();
            if (wake) wake();
        });
    }

    std::uint64_t offset() const override { return committed_; }

private:
    std::shared_ptr<Pipe> pipe_;
    std::uint64_t committed_ = 0;  // the I/O thread's only
};

// The owner is berth itself: its answer is small, and these headers are all it says.
Response relay(net::Exchange& exchange) {
    const auto& head = exchange.read_head();
    Response response{head.status, {}, {}, {}, {}};
    for (auto relayed : {"Location", "Range", "Docker-Upload-UUID", "Docker-Content-Digest", "Content-Type"})
        if (auto value = head.header(relayed); !value.empty()) response.set(relayed, value);
    std::vector<char> piece(64 * 1024);
    while (auto got = exchange.read_body(piece)) {
        if (response.body.size() + got > max_answer_bytes)
            throw oci::Error(oci::ErrorCode::unavailable, "the replica owning this upload answered too much");
        response.body.append(piece.data(), got);
    }
    return response;
}

}  // namespace

Plan plan_forward(const replication::PeerService& peers, const std::string& owner, Request& request,
                  const std::string& method, const std::string& target) {
    // The owner's answer may take a while: finishing a large upload fsyncs it.
    // An owner that stops reading fails the request after the client's idle timeout.
    net::RequestHead head{method, target, {}, request.content_length, request.has_body, std::chrono::seconds(60)};
    head.headers = {{protocol::header::forwarded, "1"}};
    // The owner authorizes the request as the client's own: the peer's authentication (which
    // peers.open_peer adds) only says where it came from.
    if (!request.authorization.empty()) head.headers.emplace_back("Authorization", request.authorization);
    if (!request.content_type.empty()) head.headers.emplace_back("Content-Type", request.content_type);
    if (!request.content_range.empty()) head.headers.emplace_back("Content-Range", request.content_range);
    auto pipe = std::make_shared<Pipe>();
    try {
        pipe->exchange = peers.open_peer(owner, std::move(head));
    } catch (const std::exception& error) {
        throw oci::Error(oci::ErrorCode::unavailable, "the replica owning this upload is unreachable", error.what());
    }
    Plan plan;
    if (request.has_body) {
        plan.body = Plan::Body::stream;
        plan.sink = std::make_unique<ForwardSink>(pipe);
    }
    plan.finish = [pipe, body = request.has_body](std::string&, std::uint64_t) {
        try {
            if (body) {
                pipe->wait_written();
                pipe->exchange->end_request();
            }
            return relay(*pipe->exchange);
        } catch (...) {
            lost(std::current_exception());
        }
    };
    return plan;
}

}  // namespace berth::http
