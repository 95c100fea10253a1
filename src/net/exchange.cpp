#include <boost/asio/post.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <algorithm>
#include <cctype>
#include <charconv>
#include <future>
#include <limits>

#include "errors.hpp"
#include "exchange_state.hpp"

namespace berth::net {

namespace {

constexpr std::uint32_t header_limit = 64 * 1024;

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
}

std::exception_ptr usage_error(const std::string& message) {
    return std::make_exception_ptr(std::logic_error(message));
}

}  // namespace

std::string ResponseHead::header(std::string_view name) const {
    for (auto& [key, value] : headers)
        if (iequals(key, name)) return value;
    return {};
}

Exchange::State::State(std::shared_ptr<Core> core_, std::shared_ptr<Connection> connection_, const Origin& origin,
                       RequestHead head)
    : core(std::move(core_)), connection(std::move(connection_)),
      what_(head.method + " " + origin.address.str() + head.target),
      header_timeout_(head.header_timeout.value_or(core->options.header_timeout)) {
    request_.version(11);
    request_.method_string(head.method);
    request_.target(head.target);
    for (auto& [name, value] : head.headers)
        if (!iequals(name, "content-length") && !iequals(name, "transfer-encoding")) request_.insert(name, value);
    if (request_.find(http::field::host) == request_.end()) request_.set(http::field::host, origin.address.str());
    if (head.content_length) {
        request_.content_length(*head.content_length);
        remaining_ = *head.content_length;
        body_expected_ = *head.content_length > 0;
    } else if (head.has_body) {
        request_.chunked(true);
        body_expected_ = true;
    }
    request_.body().data = nullptr;
    request_.body().size = 0;
    request_.body().more = body_expected_;
    serializer_.emplace(request_);
}

std::exception_ptr Exchange::State::fail(const boost::system::error_code& ec, const std::string& doing) {
    failed_ = true;
    auto error = make_error(ec, what_ + ": " + doing, Error::Kind::closed);
    const bool nothing_received = connection->buffer().size() == 0 && (!parser_ || !parser_->got_some()) && !head_read_;
    if (connection->reused() && nothing_received) {
        try {
            std::rethrow_exception(error);
        } catch (const Error& e) {
            if (e.kind() == Error::Kind::closed) error = std::make_exception_ptr(StaleConnection(e.kind(), e.what()));
        }
    }
    return error;
}

void Exchange::State::start(Done done) {
    connection->tcp().expires_after(core->options.idle_timeout);
    auto written = [self = shared_from_this(), done = std::move(done)](boost::system::error_code ec, std::size_t) {
        done(ec ? self->fail(ec, "writing the request head") : nullptr);
    };
    // A body-less request is written whole; otherwise the serializer stops after the head.
    connection->visit([&](auto& stream) {
        if (body_expected_) http::async_write_header(stream, *serializer_, std::move(written));
        else http::async_write(stream, *serializer_, std::move(written));
    });
}

void Exchange::State::write(std::span<const char> piece, Done done) {
    if (!body_expected_ || serializer_->is_done())
        return done(usage_error(what_ + ": write after the request was complete"));
    if (remaining_ && piece.size() > *remaining_)
        return done(usage_error(what_ + ": more request body than its Content-Length"));
    if (failed_) return done(make_error(Error::Kind::closed, what_ + ": the exchange already failed"));
    if (piece.empty()) return done(nullptr);
    request_.body().data = const_cast<char*>(piece.data());
    request_.body().size = piece.size();
    request_.body().more = true;
    write_serializer(std::move(done), piece.size());
}

void Exchange::State::end_request(Done done) {
    if (!body_expected_ || serializer_->is_done()) return done(nullptr);
    if (remaining_ && *remaining_ > 0)
        return done(usage_error(what_ + ": request body " + std::to_string(*remaining_) +
                                " bytes short of its Content-Length"));
    if (failed_) return done(make_error(Error::Kind::closed, what_ + ": the exchange already failed"));
    request_.body().data = nullptr;
    request_.body().size = 0;
    request_.body().more = false;
    write_serializer(std::move(done), 0);
}

void Exchange::State::write_serializer(Done done, std::size_t piece) {
    connection->tcp().expires_after(core->options.idle_timeout);
    connection->visit([&](auto& stream) {
        http::async_write(
            stream, *serializer_,
            [self = shared_from_this(), piece, done = std::move(done)](boost::system::error_code ec, std::size_t) {
                // need_buffer: the piece is out, the serializer wants the next
                if (ec && ec != http::error::need_buffer) return done(self->fail(ec, "writing the request body"));
                if (self->remaining_) *self->remaining_ -= piece;
                done(nullptr);
            });
    });
}

void Exchange::State::read_head(std::function<void(std::exception_ptr, const ResponseHead*)> done) {
    if (head_read_) return done(nullptr, &head_);
    if (failed_) return done(make_error(Error::Kind::closed, what_ + ": the exchange already failed"), nullptr);
    connection->tcp().expires_after(header_timeout_);
    read_header_skipping_interim(std::move(done));
}

void Exchange::State::read_header_skipping_interim(std::function<void(std::exception_ptr, const ResponseHead*)> done) {
    parser_.emplace();
    // The caller bounds what it reads. (Not boost::none: Boost 1.74 compares
    // the length against the empty optional and fails every body.)
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    parser_->header_limit(header_limit);
    if (request_.method() == http::verb::head) parser_->skip(true);
    connection->visit([&](auto& stream) {
        http::async_read_header(
            stream, connection->buffer(), *parser_,
            [self = shared_from_this(), done = std::move(done)](boost::system::error_code ec, std::size_t) mutable {
                if (ec) return done(self->fail(ec, "reading the response head"), nullptr);
                auto& response = self->parser_->get();
                const int status = static_cast<int>(response.result_int());
                // 1xx answers come before the real one (101 would end HTTP on this connection)
                if (status >= 100 && status < 200 && status != 101)
                    return self->read_header_skipping_interim(std::move(done));
                self->head_.status = status;
                for (auto& field : response)
                    self->head_.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
                if (auto length = response.find(http::field::content_length); length != response.end()) {
                    std::uint64_t value = 0;
                    auto text = length->value();
                    if (std::from_chars(text.data(), text.data() + text.size(), value).ec == std::errc())
                        self->head_.content_length = value;
                }
                self->head_read_ = true;
                if (!self->parser_->is_done() && !self->parser_->chunked())
                    if (auto length = self->parser_->content_length()) self->body_left_ = *length;
                self->connection->tcp().expires_never();
                done(nullptr, &self->head_);
            });
    });
}

namespace {
constexpr std::size_t raw_fill_bytes = 256 * 1024;
}  // namespace

void Exchange::State::read_body(std::span<char> into, std::function<void(std::exception_ptr, std::size_t)> done) {
    if (!head_read_) return done(usage_error(what_ + ": read_body before read_head"), 0);
    if (into.empty()) return done(usage_error(what_ + ": read_body into an empty buffer"), 0);
    if (parser_->is_done()) return done(nullptr, 0);
    if (failed_) return done(make_error(Error::Kind::closed, what_ + ": the exchange already failed"), 0);
    if (body_left_) return read_raw_body(into, std::move(done));
    parser_->get().body().data = into.data();
    parser_->get().body().size = into.size();
    connection->tcp().expires_after(core->options.idle_timeout);
    connection->visit([&](auto& stream) {
        http::async_read_some(stream, connection->buffer(), *parser_,
                              [self = shared_from_this(), into, done = std::move(done)](boost::system::error_code ec,
                                                                                        std::size_t) mutable {
                                  auto& parser = *self->parser_;
                                  const std::size_t n = into.size() - parser.get().body().size;
                                  if (ec == http::error::need_buffer) ec = {};
                                  // A body delimited by the close of a TLS connection often ends without close_notify.
                                  if (ec == boost::asio::ssl::error::stream_truncated && parser.need_eof())
                                      parser.put_eof(ec);
                                  if (ec) return done(self->fail(ec, "reading the response body"), 0);
                                  // Only framing (a chunk header) was parsed: read on for the caller's bytes.
                                  if (n == 0 && !parser.is_done()) return self->read_body(into, std::move(done));
                                  if (parser.is_done()) self->connection->tcp().expires_never();
                                  done(nullptr, n);
                              });
    });
}

void Exchange::State::read_raw_body(std::span<char> into, std::function<void(std::exception_ptr, std::size_t)> done) {
    if (*body_left_ == 0) return done(nullptr, 0);
    const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(into.size(), *body_left_));
    // What came in with the head first.
    if (auto& buffered = connection->buffer(); buffered.size()) {
        const auto n = boost::asio::buffer_copy(boost::asio::buffer(into.data(), want), buffered.data());
        buffered.consume(n);
        *body_left_ -= n;
        return done(nullptr, n);
    }
    read_raw_more(into.first(want), 0, std::move(done));
}

// Reads on while more has arrived, up to raw_fill_bytes (or the body's or the
// buffer's end): on a fast link a socket read brings a few segments, and
// handing each to a waiting thread would cost more than the bytes. Nothing
// waits for bytes not there yet, so a slow link delivers as it goes.
void Exchange::State::read_raw_more(std::span<char> into, std::size_t got,
                                    std::function<void(std::exception_ptr, std::size_t)> done) {
    connection->tcp().expires_after(core->options.idle_timeout);
    connection->visit([&](auto& stream) {
        stream.async_read_some(boost::asio::buffer(into.data() + got, into.size() - got),
                               [self = shared_from_this(), into, got, done = std::move(done)](
                                   boost::system::error_code ec, std::size_t n) mutable {
                                   if (ec) return done(self->fail(ec, "reading the response body"), 0);
                                   *self->body_left_ -= n;
                                   got += n;
                                   if (*self->body_left_ == 0) self->connection->tcp().expires_never();
                                   boost::system::error_code unused;
                                   if (*self->body_left_ > 0 && got < into.size() && got < raw_fill_bytes &&
                                       self->connection->tcp().socket().available(unused) > 0)
                                       return self->read_raw_more(into, got, std::move(done));
                                   done(nullptr, got);
                               });
    });
}

bool Exchange::State::reusable() {
    const bool body_done = body_left_ ? *body_left_ == 0 : parser_ && parser_->is_done();
    return !failed_ && serializer_->is_done() && parser_ && body_done && !parser_->need_eof() &&
           parser_->get().keep_alive() && request_.keep_alive() && connection->tcp().socket().is_open();
}

void Exchange::State::release() {
    if (std::exchange(released_, true)) return;
    if (reusable()) core->give_back(connection);
    else connection->close();
}

// ---- Exchange: posts each call to the connection's strand ----

namespace {

template <typename T>
T wait_for(Core& core, const std::function<void(std::function<void(std::exception_ptr, T)>)>& start) {
    if (core.io.get_executor().running_in_this_thread())
        throw std::logic_error("a blocking berth::net call on the client's own I/O thread");
    if (core.stopped()) throw Error(Error::Kind::closed, "the HTTP client has been destroyed");
    auto promise = std::make_shared<std::promise<T>>();
    auto result = promise->get_future();
    start([promise](std::exception_ptr error, T value) {
        if (error) promise->set_exception(error);
        else promise->set_value(std::move(value));
    });
    return result.get();
}

}  // namespace

Exchange::Exchange(std::shared_ptr<State> state) : state_(std::move(state)) {}

Exchange::~Exchange() {
    auto& strand = state_->connection->strand();
    // With the I/O threads gone no handler runs concurrently (or at all); on
    // the strand, none of this connection's.
    if (state_->core->stopped() || strand.running_in_this_thread()) {
        state_->release();
        return;
    }
    if (state_->core->io.get_executor().running_in_this_thread()) {
        boost::asio::post(strand, [state = state_] { state->release(); });
        return;
    }
    // A blocking caller's next request must find the connection back in the pool.
    auto released = std::make_shared<std::promise<void>>();
    auto done = released->get_future();
    boost::asio::post(strand, [state = state_, released] {
        state->release();
        released->set_value();
    });
    done.wait();
}

void Exchange::async_write(std::span<const char> piece, std::function<void(std::exception_ptr)> done) {
    boost::asio::post(state_->connection->strand(), [state = state_, piece, done = std::move(done)]() mutable {
        state->write(piece, std::move(done));
    });
}

void Exchange::async_end_request(std::function<void(std::exception_ptr)> done) {
    boost::asio::post(state_->connection->strand(),
                      [state = state_, done = std::move(done)]() mutable { state->end_request(std::move(done)); });
}

void Exchange::async_read_head(std::function<void(std::exception_ptr, const ResponseHead*)> done) {
    boost::asio::post(state_->connection->strand(),
                      [state = state_, done = std::move(done)]() mutable { state->read_head(std::move(done)); });
}

void Exchange::async_read_body(std::span<char> into, std::function<void(std::exception_ptr, std::size_t)> done) {
    boost::asio::post(state_->connection->strand(), [state = state_, into, done = std::move(done)]() mutable {
        state->read_body(into, std::move(done));
    });
}

void Exchange::write(std::span<const char> piece) {
    wait_for<bool>(*state_->core, [&](auto done) {
        async_write(piece, [done = std::move(done)](std::exception_ptr error) { done(error, true); });
    });
}

void Exchange::end_request() {
    wait_for<bool>(*state_->core, [&](auto done) {
        async_end_request([done = std::move(done)](std::exception_ptr error) { done(error, true); });
    });
}

const ResponseHead& Exchange::read_head() {
    return *wait_for<const ResponseHead*>(*state_->core, [&](auto done) { async_read_head(std::move(done)); });
}

std::size_t Exchange::read_body(std::span<char> into) {
    return wait_for<std::size_t>(*state_->core, [&](auto done) { async_read_body(into, std::move(done)); });
}

}  // namespace berth::net
