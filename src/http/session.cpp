#include "session.hpp"

#include "berth/net/reach.hpp"

#include <openssl/x509v3.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>

#include "berth/observe/log.hpp"
#include "context.hpp"
#include "dispatch.hpp"
#include "lingering_close.hpp"
#include "request_head.hpp"
#include "request_record.hpp"
#include "response_writer.hpp"
#include "tls_stream.hpp"

namespace berth::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

// Large enough that hashing and writing dominate, small enough that 32
// concurrent uploads cost a few MiB.
constexpr std::size_t body_chunk_bytes = 256 * 1024;
// A body the route does not want is read and dropped up to this size, so the
// connection can stay open; larger ones close it.
constexpr std::size_t unwanted_body_limit = 64 * 1024;
// A request waiting this long for its party's pool (every thread held by a
// hung upstream, say) is answered 504 rather than made to wait on.
constexpr std::chrono::seconds party_queue_wait{30};

template <typename Work>
Response guarded(Work&& work) {
    try {
        return work();
    } catch (const oci::Error& error) {
        if (error.code() == oci::ErrorCode::internal)
            observe::log("error", "internal error", {{"error", error.what()}});
        return error_response(error);
    } catch (const std::exception& error) {
        observe::log("error", "request failed", {{"error", error.what()}});
        return error_response(oci::ErrorCode::internal, "internal server error");
    } catch (...) {
        // Nothing thrown may leave a request unanswered: on a worker it would end the process.
        observe::log("error", "request failed", {{"error", "an exception of no known type"}});
        return error_response(oci::ErrorCode::internal, "internal server error");
    }
}

// Stream is beast::tcp_stream for plain HTTP or a TlsStream over it.
template <typename Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
    static constexpr bool tls = !std::is_same_v<Stream, beast::tcp_stream>;
    using std::enable_shared_from_this<Session<Stream>>::shared_from_this;

public:
    template <typename... StreamArgs>
    Session(ServerContext& context, std::shared_ptr<void> tls_context, StreamArgs&&... args)
        : tls_context_(std::move(tls_context)), stream_(std::forward<StreamArgs>(args)...), context_(context),
          writer_(stream_, context_), record_(context_) {
        ++context_.connections;
        ++context_.request_metrics.connections;
        beast::error_code ec;
        auto endpoint = socket().remote_endpoint(ec);
        if (!ec) record_.peer = endpoint.address().to_string();
    }

    ~Session() {
        close_file();
        // Not through close(): the last reference to a request in flight was let go (a bug).
        if (record_.open() && record_.ended.empty()) record_.ended = "dropped by the server";
        record_.end(request_);
        --context_.connections;
        --context_.request_metrics.connections;
        context_.client_limits.close(record_.peer);
    }

    void start() {
        if constexpr (tls) {
            lowest().expires_after(context_.options.idle_timeout);
            stream_.async_handshake([self = shared_from_this()](beast::error_code ec, std::size_t) {
                if (ec) return self->close();  // not TLS, or a certificate the client refused
                // A certificate presented has been verified against the client CA by now; a node
                // agent's also carries the agents' name (any other the CA signed is no agent).
                const auto* cert = SSL_get0_peer_certificate(self->stream_.native_handle());
                const auto& name = self->context_.options.agent_cert_name;
                self->certified_ =
                    cert && X509_check_host(const_cast<X509*>(cert), name.data(), name.size(), 0, nullptr) == 1;
                auto& metrics = self->context_.request_metrics;
                ++(self->stream_.kernel_encrypts()  ? metrics.tls_kernel_connections
                   : self->stream_.berth_encrypts() ? metrics.tls_berth_connections
                                                    : metrics.tls_openssl_connections);
                self->read_header();
            });
        } else {
            read_header();
        }
    }

private:
    beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream_); }
    tcp::socket& socket() { return lowest().socket(); }

    void read_header() {
        if (context_.draining) return close();  // between requests: nothing is left unanswered
        parser_.emplace();
        parser_->header_limit(static_cast<std::uint32_t>(context_.options.max_header_bytes));
        parser_->body_limit(std::numeric_limits<std::uint64_t>::max());  // each route sets its own limit
        lowest().expires_after(context_.options.idle_timeout);
        bhttp::async_read_header(stream_, buffer_, *parser_,
                                 beast::bind_front_handler(&Session<Stream>::on_header, shared_from_this()));
    }

    void on_header(beast::error_code ec, std::size_t) {
        if (ec) {
            if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow)
                return reject(431, oci::ErrorCode::bad_request, "request header fields too large");
            if (ec == bhttp::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::eof ||
                ec == asio::error::connection_reset || ec == asio::error::operation_aborted ||
                ec == bhttp::error::partial_message)
                return close();
            return reject(400, oci::ErrorCode::bad_request, "malformed request");
        }
        begin_request();
        auto& head = parser_->get();
        record_.method = std::string(head.method_string());
        record_.target = std::string(head.target().substr(0, 1024));
        if (!context_.client_limits.allow_request(record_.peer))
            return reject(429, oci::ErrorCode::too_many_requests, "request rate limit exceeded");
        keep_alive_ = head.keep_alive();
        party_.clear();
        std::optional<std::uint64_t> length;
        if (auto known = parser_->content_length()) length = *known;
        auto request = request_from_head(head, length, !parser_->is_done(), record_.peer, tls);
        if (request) request->certified = certified_;
        if (!request) {
            request_ = Request{};
            return reject(400, oci::ErrorCode::bad_request, "malformed request target");
        }
        request_ = std::move(*request);
        expect_continue_ = beast::iequals(head[bhttp::field::expect], "100-continue");

        // Every request is planned first with nothing remote allowed: a read
        // or an upload's step on the I/O thread (index lookups, a session
        // opened, a file opened to append), anything that may fsync or check
        // a password on a worker. A plan that would wait on an upstream or a
        // peer is made again on that party's own pool (party_pools.hpp).
        const bool read = request_.method == Method::get || request_.method == Method::head;
        // Basic credentials may cost a bcrypt check, and peers or upstreams a
        // round trip: never on an I/O thread.
        const bool basic =
            request_.authorization.size() > 5 && beast::iequals(request_.authorization.substr(0, 6), "basic ");
        original_ = request_;
        const auto& route = *request_.target.route;
        // A POST with a body is a single-POST upload: it stores a blob, always on a worker.
        const bool quick_write = route.has(quick_writes) && !(request_.method == Method::post && request_.has_body);
        if ((read || quick_write) && route.has(quick) && !basic) return planned(make_plan(true, true));
        plan_on_worker();
    }

    void plan_on_worker() {
        asio::post(context_.worker_pool, [self = shared_from_this()] {
            auto planning = self->make_plan(true);
            if (planning.party.empty() && !planning.error && self->body_arrived_with_head())
                return self->finish_on_worker();
            asio::post(self->stream_.get_executor(),
                       [self, planning = std::move(planning)]() mutable { self->planned(std::move(planning)); });
        });
    }

    // A small body (a manifest) usually comes in the same read as its head: already in buffer_.
    // Such a request is finished on the worker that planned it, sparing it the trips to the
    // connection's thread to read a body that is there and back to a worker to finish it.
    bool body_arrived_with_head() const {
        const auto length = request_.content_length;
        return request_.has_body && length && plan_.body == Plan::Body::buffer && !plan_.sink &&
               !plan_.expected_bytes && *length <= plan_.buffer_limit && *length <= buffer_.size();
    }

    // On the worker, while the connection waits for this request's plan (nothing else touches it).
    void finish_on_worker() {
        const auto length = static_cast<std::size_t>(*request_.content_length);
        plan_.abort = nullptr;  // finish owns the outcome now
        auto response = guarded([&] {
            consume(static_cast<const char*>(buffer_.data().data()), length);
            buffer_.consume(length);
            raw_remaining_ = 0;
            return plan_.finish(body_, 0);
        });
        asio::post(stream_.get_executor(), [self = shared_from_this(), response = std::move(response)]() mutable {
            self->respond(std::move(response));
        });
    }

    // How planning went: an answer already, or a party to plan on again.
    struct Planning {
        std::optional<Response> error;
        std::string party;
    };

    Planning make_plan(bool local_only, bool io_thread = false) {
        try {
            std::optional<net::LocalOnly> guard;
            std::optional<net::OnIoThread> on_io;
            if (local_only) guard.emplace();
            if (io_thread) on_io.emplace();
            plan_ = plan_request(context_.handlers, request_);
            return {};
        } catch (const net::NeedsRemote& needs) {
            return {std::nullopt, needs.party};
        } catch (...) {
            return {guarded([]() -> Response { throw; }), {}};
        }
    }

    void planned(Planning planning) {
        if (planning.party == net::workers_party) {
            request_ = original_;  // as it came: the first try may have rewritten its repository name
            return plan_on_worker();
        }
        if (!planning.party.empty()) return plan_on(std::move(planning.party));
        planning.error ? respond(std::move(*planning.error)) : on_plan();
    }

    // Planning again from the request as it came (the first try may have
    // rewritten its repository name), on the party's pool.
    void plan_on(std::string party) {
        party_ = std::move(party);
        request_ = original_;
        const auto posted = context_.party_pools.post(party_, [self = shared_from_this()](auto queued) {
            Planning planning;
            if (queued > party_queue_wait) {
                ++self->context_.request_metrics.remote_queue_refusals;
                planning.error = error_response(oci::ErrorCode::gateway_timeout,
                                                "waited too long for " + self->party_ + " to be free");
            } else {
                planning = self->make_plan(false);
                planning.party.clear();  // planned: nothing further to wait for
            }
            asio::post(self->stream_.get_executor(),
                       [self, planning = std::move(planning)]() mutable { self->planned(std::move(planning)); });
        });
        if (!posted) {
            ++context_.request_metrics.remote_queue_refusals;
            respond(error_response(oci::ErrorCode::unavailable, "too many requests are waiting for " + party_));
        }
    }

    // Blocking work of this request runs where its plan was made: on its
    // party's pool when it waits on one (a forwarded upload's answer), else
    // on the workers.
    template <typename Work>
    void post_blocking(Work&& work) {
        if (!party_.empty() && context_.party_pools.post(party_, [work](auto) mutable { work(); })) return;
        asio::post(context_.worker_pool, std::forward<Work>(work));
    }

    void on_plan() {
        if (!request_.has_body) return finish();
        if (plan_.body == Plan::Body::none) {
            // The answer needs no body (a 401, say): a large one is not waited
            // for, the answer goes now and the connection lingers, then closes.
            if (request_.content_length && *request_.content_length > unwanted_body_limit) return finish();
            plan_.body = Plan::Body::buffer;
            plan_.buffer_limit = unwanted_body_limit;
        }
        // With a Content-Length the body is read straight from the socket in
        // large pieces; Beast's parser would read it 512 bytes at a time.
        raw_remaining_ = request_.content_length;
        if (!expect_continue_) return read_body();
        continue_.emplace(bhttp::status::continue_, 11);
        lowest().expires_after(context_.options.body_timeout);
        bhttp::async_write(stream_, *continue_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
            if (ec) return self->lose_body(ec, "100 Continue was not sent");
            self->read_body();
        });
    }

    void read_body() {
        if (plan_.body == Plan::Body::stream && !plan_.sink) return;  // the request ended while the sink was full
        if (raw_remaining_) return read_raw();
        parse_body();
    }

    // Where the next body bytes go: straight into the sink's buffer when the
    // body streams, else chunk_. Empty while the sink is full; it calls
    // read_body again once it has room.
    std::span<char> body_space() {
        if (plan_.body != Plan::Body::stream) {
            if (chunk_.empty()) chunk_.resize(body_chunk_bytes);
            return chunk_;
        }
        return plan_.sink->buffer(
            [self = shared_from_this()] { asio::post(self->stream_.get_executor(), [self] { self->read_body(); }); });
    }

    void read_raw() {
        // What the header read already pulled in is the start of the body.
        while (buffer_.size() && *raw_remaining_) {
            auto space = body_space();
            if (space.empty()) return;
            auto n = std::min({buffer_.size(), space.size(), static_cast<std::size_t>(*raw_remaining_)});
            std::memcpy(space.data(), buffer_.data().data(), n);
            if (!take(space.data(), n)) return;
            buffer_.consume(n);
            *raw_remaining_ -= n;
        }
        if (*raw_remaining_ == 0) return finish();
        auto space = body_space();
        if (space.empty()) return;
        lowest().expires_after(context_.options.body_timeout);
        auto want = static_cast<std::size_t>(std::min<std::uint64_t>(space.size(), *raw_remaining_));
        stream_.async_read_some(asio::buffer(space.data(), want),
                                [self = shared_from_this(), data = space.data()](beast::error_code ec, std::size_t n) {
                                    if (n && !self->take(data, n)) return;
                                    *self->raw_remaining_ -= n;
                                    if (ec) return self->lose_body(ec);
                                    if (*self->raw_remaining_ == 0) return self->finish();
                                    self->read_raw();
                                });
    }

    // Hands body bytes to the plan; false when that failed and was answered.
    bool take(const char* data, std::size_t n) {
        try {
            consume(data, n);
            return true;
        } catch (...) {
            keep_alive_ = false;
            abort_then_respond(guarded([]() -> Response { throw; }));
            return false;
        }
    }

    // The client went away or stalled. An upload session keeps what arrived,
    // for the client to resume; a one-shot request is undone.
    void lose_body(beast::error_code ec, std::string_view why = "the body stopped") {
        record_.ended = std::string(why) + ": " + ec.message();
        abort_plan();
        close();
    }

    bool body_read() const { return raw_remaining_ ? *raw_remaining_ == 0 : !parser_ || parser_->is_done(); }

    void parse_body() {
        body_space_ = body_space();
        if (body_space_.empty()) return;
        auto& body = parser_->get().body();
        body.data = body_space_.data();
        body.size = body_space_.size();
        lowest().expires_after(context_.options.body_timeout);
        bhttp::async_read(stream_, buffer_, *parser_,
                          beast::bind_front_handler(&Session<Stream>::on_body, shared_from_this()));
    }

    void on_body(beast::error_code ec, std::size_t) {
        if (ec == bhttp::error::need_buffer) ec = {};
        const std::size_t got = body_space_.size() - parser_->get().body().size;
        if (!take(body_space_.data(), got)) return;
        if (ec) return lose_body(ec);
        if (parser_->is_done()) return finish();
        parse_body();
    }

    void consume(const char* data, std::size_t got) {
        record_.body_bytes += got;
        if (plan_.expected_bytes && record_.body_bytes > *plan_.expected_bytes)
            throw oci::Error(oci::ErrorCode::blob_upload_invalid, "body is longer than its Content-Range");
        if (plan_.body == Plan::Body::stream) {
            plan_.sink->commit(got);  // the bytes are already in its buffer
        } else {
            if (body_.size() + got > plan_.buffer_limit)
                throw oci::Error(oci::ErrorCode::payload_too_large, "request body too large");
            body_.append(data, got);
        }
    }

    // A request that will never reach finish undoes what its plan began. The
    // sink goes first: letting go of an upload waits for its hashing, which
    // must not hold up an I/O thread, and the undo needs the session free.
    void abort_plan(std::function<void()> then = nullptr) {
        auto abort = std::move(plan_.abort);
        plan_.abort = nullptr;
        if (!abort && !plan_.sink) {
            if (then) then();
            return;
        }
        asio::post(context_.worker_pool, [self = shared_from_this(), sink = std::move(plan_.sink),
                                          abort = std::move(abort), then = std::move(then)]() mutable {
            sink.reset();
            try {
                if (abort) abort();
            } catch (const std::exception& error) {
                // Usually nothing to undo any more (purged, or finished elsewhere).
                observe::log("info", "undoing a failed request", {{"error", error.what()}});
            }
            if (then) asio::post(self->stream_.get_executor(), then);
        });
    }

    // Letting go of an upload's sink may wait for its hashing: not on an I/O thread.
    void release_sink() {
        if (plan_.sink) asio::post(context_.worker_pool, [sink = std::move(plan_.sink)]() mutable { sink.reset(); });
    }

    // The client hears of the failure only once it has been undone.
    void abort_then_respond(Response response) {
        abort_plan([self = shared_from_this(), response = std::move(response)]() mutable {
            self->respond(std::move(response));
        });
    }

    void finish() {
        if (plan_.expected_bytes && record_.body_bytes != *plan_.expected_bytes)
            return abort_then_respond(
                error_response(oci::ErrorCode::blob_upload_invalid, "body is shorter than its Content-Range"));
        plan_.abort = nullptr;  // finish owns the outcome now
        if (!plan_.blocking && !plan_.sink) return respond(guarded([&] { return plan_.finish(body_, 0); }));
        std::function<void()> completion = [self = shared_from_this()] { self->complete(); };
        // What the sink still stores is waited for by the thread storing it,
        // not by a worker given over to waiting (a wake-up and a sleep fewer).
        // An append that finishes quickly runs right there: one thread hop
        // fewer for every chunk of a chunked upload. Blocking work (a PUT's
        // fsyncs) is handed on from there, as it would have been from here.
        if (plan_.sink) {
            std::function<void()> then = completion;
            if (plan_.blocking) then = [self = shared_from_this(), completion] { self->post_blocking(completion); };
            if (plan_.sink->when_stored(then)) return;
        }
        post_blocking(std::move(completion));
    }

    // Off the I/O threads: waits for what the sink still stores, finishes the
    // plan, and answers on the connection's thread.
    void complete() {
        auto sink = std::move(plan_.sink);
        auto response = guarded([&] {
            std::uint64_t offset = 0;
            if (sink) {
                sink->finish();
                offset = sink->offset();
                sink.reset();  // let go of the upload session before finishing it
            }
            return plan_.finish(body_, offset);
        });
        sink.reset();
        asio::post(stream_.get_executor(), [self = shared_from_this(), response = std::move(response)]() mutable {
            self->respond(std::move(response));
        });
    }

    // Answers a request whose head could not be used, then closes. Nothing of the connection's
    // previous request is said of it (log, metrics).
    void reject(int status, oci::ErrorCode code, const char* message) {
        if (!record_.open()) {
            begin_request();
            record_.method.clear();
            record_.target.clear();
        }
        request_ = Request{};
        keep_alive_ = false;
        auto response = error_response(code, message);
        response.status = status;
        respond(std::move(response));
    }

    void respond(Response response) {
        release_sink();
        record_.principal = request_.principal.name;
        if (!body_read()) keep_alive_ = false;  // unread body: the stream is out of step
        if (context_.draining) keep_alive_ = false;
        if (request_.method == Method::head && !response.head_length) {
            response.head_length = response.body.size();
            response.body.clear();
        }
        record_.status = response.status;
        lowest().expires_after(context_.options.body_timeout);
        record_.bytes_out = writer_.write(std::move(response), keep_alive_, shared_from_this(),
                                          [self = shared_from_this()](bool ok) { self->on_written(ok); });
    }

    void on_written(bool ok) {
        close_file();
        record_.end(request_);
        if (ok && !keep_alive_ && !body_read())
            return close_lingering(lowest(), shared_from_this(), [self = shared_from_this()] { self->close(); });
        if (!ok || !keep_alive_) return close();
        read_header();
    }

    void begin_request() {
        record_.begin();
        body_.clear();
        raw_remaining_.reset();
        plan_ = Plan{};
        writer_.reset();
    }

    void close_file() {
        // A body cut short (the client left) counts what was sent, not what was promised.
        record_.bytes_out -= std::min(record_.bytes_out, writer_.unsent());
        writer_.close_file();
    }

    void close() {
        if (record_.open()) abort_plan();
        release_sink();
        close_file();
        record_.end(request_);
        beast::error_code ec;
        socket().shutdown(tcp::socket::shutdown_both, ec);
        socket().close(ec);
    }

    std::shared_ptr<void> tls_context_;  // the ssl::context this connection was accepted with
    Stream stream_;
    ServerContext& context_;
    beast::flat_buffer buffer_;  // bounded by the parser's header limit and the body chunk size
    std::optional<bhttp::request_parser<bhttp::buffer_body>> parser_;
    std::vector<char> chunk_;
    std::span<char> body_space_;  // where the parser puts body bytes
    std::string body_;
    Request request_;
    Request original_;   // request_ as it came, for planning again on a party's pool
    std::string party_;  // the outside party this request's plan waits on, if any
    Plan plan_;
    bool keep_alive_ = false;
    bool expect_continue_ = false;
    bool certified_ = false;                      // the client presented a certificate the client CA signed
    std::optional<std::uint64_t> raw_remaining_;  // body bytes still to read past the parser
    std::optional<bhttp::response<bhttp::empty_body>> continue_;
    ResponseWriter<Stream> writer_;
    RequestRecord record_;  // in flight, metrics, access log
};

}  // namespace

void start_session(tcp::socket socket, ServerContext& context, std::shared_ptr<asio::ssl::context> tls) {
    if (tls) {
        auto* ssl = tls->native_handle();
        const TlsSending sending{context.options.tls_kernel && kernel_tls_available(),
                                 context.options.tls_berth_records};
        std::make_shared<Session<TlsStream>>(context, std::move(tls), std::move(socket), ssl, sending)->start();
    } else {
        std::make_shared<Session<beast::tcp_stream>>(context, nullptr, std::move(socket))->start();
    }
}

}  // namespace berth::http
