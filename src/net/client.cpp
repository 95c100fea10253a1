#include "berth/net/client.hpp"

#include <boost/asio/post.hpp>
#include <future>
#include <thread>

#include <nlohmann/json.hpp>

#include "berth/net/background.hpp"
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
            if (core->options.background) run_in_background();
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

void open_exchange(const std::shared_ptr<Core>& core, const Origin& origin, RequestHead head, bool fresh,
                   OpenDone done) {
    std::shared_ptr<Connection> connection;
    try {
        connection = core->take(origin, fresh);
    } catch (...) {
        boost::asio::post(core->io,
                          [error = std::current_exception(), done = std::move(done)] { done(error, nullptr); });
        return;
    }
    auto state = std::make_shared<Exchange::State>(core, connection, origin, std::move(head));
    auto started = [state, done = std::move(done)](std::exception_ptr error) {
        if (error) return done(error, nullptr);
        done(nullptr, std::make_unique<Exchange>(state));
    };
    boost::asio::post(connection->strand(), [state, origin, started = std::move(started)]() mutable {
        if (state->connection->reused()) return state->start(std::move(started));
        state->connection->async_connect(origin, state->core->options.connect_timeout,
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

namespace {

// A whole small exchange as one chain of callbacks on the I/O thread: whoever
// waits is woken once, with the answer, not at every step.
struct WholeExchange : std::enable_shared_from_this<WholeExchange> {
    static constexpr std::size_t piece = 64 * 1024;

    std::shared_ptr<Core> core;
    Origin origin;
    RequestHead head;
    std::string body;
    std::size_t body_limit = 0;
    Client::ResponseDone done;
    bool retried = false;
    std::unique_ptr<Exchange> exchange;
    Response response;

    void start() {
        open_exchange(core, origin, head, retried,
                      [self = shared_from_this()](std::exception_ptr error, std::unique_ptr<Exchange> exchange) {
                          if (error) return self->fail(error);
                          self->opened(std::move(exchange));
                      });
    }

    void fail(std::exception_ptr error) {
        exchange.reset();
        try {
            std::rethrow_exception(error);
        } catch (const StaleConnection&) {
            // The peer closed a pooled connection while it was idle; another
            // pooled one may be just as stale, so the retry connects anew.
            if (!std::exchange(retried, true)) return start();
        } catch (...) {}
        done(error, {});
    }

    void opened(std::unique_ptr<Exchange> opened) {
        exchange = std::move(opened);
        auto self = shared_from_this();
        auto end = [self](std::exception_ptr error) {
            if (error) return self->fail(error);
            self->exchange->async_end_request([self](std::exception_ptr error) {
                if (error) return self->fail(error);
                self->exchange->async_read_head([self](std::exception_ptr error, const ResponseHead* head) {
                    if (error) return self->fail(error);
                    static_cast<ResponseHead&>(self->response) = *head;
                    if (head->content_length)
                        self->response.body.reserve(std::min<std::uint64_t>(*head->content_length, self->body_limit));
                    self->read_more();
                });
            });
        };
        if (body.empty()) end(nullptr);
        else exchange->async_write(body, std::move(end));
    }

    void read_more() {
        const auto size = response.body.size();
        response.body.resize(size + piece);
        exchange->async_read_body({response.body.data() + size, piece}, [self = shared_from_this(), size](
                                                                            std::exception_ptr error, std::size_t n) {
            if (error) return self->fail(error);
            self->response.body.resize(size + n);
            if (self->response.body.size() > self->body_limit)
                return self->fail(std::make_exception_ptr(
                    Error(Error::Kind::too_large, self->head.method + " " + self->origin.address.str() +
                                                      self->head.target + ": response body over " +
                                                      std::to_string(self->body_limit) + " bytes")));
            if (n > 0) return self->read_more();
            self->exchange.reset();  // back to the pool before anyone goes on
            self->done(nullptr, std::move(self->response));
        });
    }
};

}  // namespace

void Client::async_request(const Origin& origin, RequestHead head, std::string body, std::size_t body_limit,
                           ResponseDone done) {
    if (!body.empty() || head.has_body) {
        head.has_body = true;
        head.content_length = body.size();
    }
    auto whole = std::make_shared<WholeExchange>();
    whole->core = impl_->core;
    whole->origin = origin;
    whole->head = std::move(head);
    whole->body = std::move(body);
    whole->body_limit = body_limit;
    whole->done = std::move(done);
    whole->start();
}

Response Client::request(const Origin& origin, RequestHead head, std::string body, std::size_t body_limit) {
    if (impl_->core->io.get_executor().running_in_this_thread())
        throw std::logic_error("a blocking berth::net call on the client's own I/O thread");
    // Shared: the I/O thread may still be inside set_value when the caller wakes and returns.
    auto result = std::make_shared<std::promise<Response>>();
    auto answer = result->get_future();
    async_request(origin, std::move(head), std::move(body), body_limit,
                  [result](std::exception_ptr error, Response response) {
                      if (error) result->set_exception(error);
                      else result->set_value(std::move(response));
                  });
    return answer.get();
}

}  // namespace berth::net
