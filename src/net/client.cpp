#include "berth/net/client.hpp"

#include <boost/asio/post.hpp>
#include <future>
#include <thread>

#include <nlohmann/json.hpp>

#include "berth/observe/log.hpp"
#include "exchange_state.hpp"

namespace berth::net {

struct Client::Impl {
    std::shared_ptr<Core> core;
    std::vector<std::thread> threads;
};

Client::Client(ClientOptions options) : impl_(std::make_unique<Impl>()) {
    impl_->core = std::make_shared<Core>(std::move(options));
    const unsigned count = std::max(1u, impl_->core->options.io_threads);
    for (unsigned i = 0; i < count; ++i)
        impl_->threads.emplace_back([core = impl_->core.get()] {
            for (;;) {
                try {
                    core->io.run();
                    return;
                } catch (const std::exception& e) {  // from a caller's callback: keep serving the others
                    observe::log("error", "exception escaped an HTTP client callback", {{"error", e.what()}});
                }
            }
        });
}

Client::~Client() {
    impl_->core->shut_down();
    for (auto& thread : impl_->threads) thread.join();
    impl_->core->mark_stopped();
}

namespace {

using OpenDone = std::function<void(std::exception_ptr, std::unique_ptr<Exchange>)>;

void open_exchange(const std::shared_ptr<Core>& core, const Origin& origin, RequestHead head, bool fresh, OpenDone done) {
    std::shared_ptr<Connection> connection;
    try {
        connection = core->take(origin, fresh);
    } catch (...) {
        boost::asio::post(core->io, [error = std::current_exception(), done = std::move(done)] { done(error, nullptr); });
        return;
    }
    auto state = std::make_shared<Exchange::State>(core, connection, origin, std::move(head));
    auto started = [state, done = std::move(done)](std::exception_ptr error) {
        if (error) return done(error, nullptr);
        done(nullptr, std::make_unique<Exchange>(state));
    };
    boost::asio::post(connection->strand(), [state, origin, started = std::move(started)]() mutable {
        if (state->connection->reused()) return state->start(std::move(started));
        state->connection->async_connect(
            origin, state->core->options.connect_timeout,
            [state, started = std::move(started)](std::exception_ptr error) mutable {
                if (error) return started(error);
                state->start(std::move(started));
            });
    });
}

std::unique_ptr<Exchange> open_blocking(const std::shared_ptr<Core>& core, const Origin& origin, RequestHead head,
                                        bool fresh) {
    if (core->io.get_executor().running_in_this_thread())
        throw std::logic_error("a blocking berth::net call on the client's own I/O thread");
    auto promise = std::make_shared<std::promise<std::unique_ptr<Exchange>>>();
    auto result = promise->get_future();
    open_exchange(core, origin, std::move(head), fresh,
                  [promise](std::exception_ptr error, std::unique_ptr<Exchange> exchange) {
                      if (error) promise->set_exception(error);
                      else promise->set_value(std::move(exchange));
                  });
    return result.get();
}

}  // namespace

void Client::async_open(const Origin& origin, RequestHead head, OpenDone done) {
    open_exchange(impl_->core, origin, std::move(head), false, std::move(done));
}

std::unique_ptr<Exchange> Client::open(const Origin& origin, RequestHead head) {
    return open_blocking(impl_->core, origin, std::move(head), false);
}

Response Client::request(const Origin& origin, RequestHead head, std::string body, std::size_t body_limit) {
    if (!body.empty() || head.has_body) {
        head.has_body = true;
        head.content_length = body.size();
    }
    constexpr std::size_t piece = 64 * 1024;
    for (int attempt = 0;; ++attempt) {
        try {
            auto exchange = open_blocking(impl_->core, origin, head, attempt > 0);
            if (!body.empty()) exchange->write(body);
            exchange->end_request();
            Response response;
            static_cast<ResponseHead&>(response) = exchange->read_head();
            if (response.content_length) response.body.reserve(std::min<std::uint64_t>(*response.content_length, body_limit));
            for (;;) {
                const auto size = response.body.size();
                response.body.resize(size + piece);
                const auto n = exchange->read_body({response.body.data() + size, piece});
                response.body.resize(size + n);
                if (n == 0) break;
                if (response.body.size() > body_limit)
                    throw Error(Error::Kind::too_large, head.method + " " + origin.address.str() + head.target +
                                                            ": response body over " + std::to_string(body_limit) + " bytes");
            }
            return response;
        } catch (const StaleConnection&) {
            // The peer closed a pooled connection while it was idle; another
            // pooled one may be just as stale, so the retry connects anew.
            if (attempt > 0) throw;
        }
    }
}

}  // namespace berth::net
