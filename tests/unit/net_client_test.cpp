// berth::net::Client against real sockets on 127.0.0.1: a small blocking
// test server (a thread per connection) answers as each test needs.
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <list>
#include <mutex>
#include <thread>

#include "berth/net/client.hpp"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using namespace berth::net;
using namespace std::chrono_literals;
using HttpRequest = http::request<http::string_body>;

// The server side of one connection, plain or TLS: a sync stream for Beast.
class Peer {
public:
    Peer(tcp::socket& socket, asio::ssl::stream<tcp::socket&>* tls, std::function<void()> hold)
        : socket_(socket), tls_(tls), hold_(std::move(hold)) {}

    template <typename Buffers>
    std::size_t read_some(const Buffers& buffers, beast::error_code& ec) {
        return tls_ ? tls_->read_some(buffers, ec) : socket_.read_some(buffers, ec);
    }
    template <typename Buffers>
    std::size_t read_some(const Buffers& buffers) {
        beast::error_code ec;
        auto n = read_some(buffers, ec);
        if (ec) throw beast::system_error(ec);
        return n;
    }
    template <typename Buffers>
    std::size_t write_some(const Buffers& buffers, beast::error_code& ec) {
        return tls_ ? tls_->write_some(buffers, ec) : socket_.write_some(buffers, ec);
    }
    template <typename Buffers>
    std::size_t write_some(const Buffers& buffers) {
        beast::error_code ec;
        auto n = write_some(buffers, ec);
        if (ec) throw beast::system_error(ec);
        return n;
    }

    bool send(std::string_view bytes) {
        beast::error_code ec;
        asio::write(*this, asio::buffer(bytes.data(), bytes.size()), ec);
        return !ec;
    }
    // Blocks until the server is destroyed: a peer that never answers.
    void hold() { hold_(); }

    int requests = 0;  // on this connection, counting the one being answered

private:
    tcp::socket& socket_;
    asio::ssl::stream<tcp::socket&>* tls_;
    std::function<void()> hold_;
};

// Answers each request; false closes the connection.
using Handler = std::function<bool(const HttpRequest&, Peer&)>;

struct ServerTls {
    std::string cert, key;
    std::string client_ca;  // set: a client certificate signed by it is required
};

class TestServer {
public:
    explicit TestServer(Handler handler, std::optional<ServerTls> tls = {}) : handler_(std::move(handler)) {
        if (tls) {
            tls_.emplace(asio::ssl::context::tls_server);
            tls_->use_certificate_chain_file(tls->cert);
            tls_->use_private_key_file(tls->key, asio::ssl::context::pem);
            if (!tls->client_ca.empty()) {
                tls_->load_verify_file(tls->client_ca);
                tls_->set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
            }
        }
        acceptor_.open(tcp::v4());
        acceptor_.bind({asio::ip::make_address("127.0.0.1"), 0});
        acceptor_.listen();
        port_ = acceptor_.local_endpoint().port();
        accept_thread_ = std::thread([this] { accept_loop(); });
    }

    ~TestServer() {
        {
            std::lock_guard lock(mutex_);
            stopping_ = true;
            for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
        }
        changed_.notify_all();
        ::shutdown(acceptor_.native_handle(), SHUT_RDWR);  // wakes the blocking accept
        accept_thread_.join();
        for (auto& thread : connection_threads_) thread.join();
    }

    Origin origin(TlsOptions tls = {}) const { return {{"127.0.0.1", std::to_string(port_)}, std::move(tls)}; }
    int accepted() const { return accepted_; }
    std::string last_server_name() {
        std::lock_guard lock(mutex_);
        return server_name_;
    }
    // Waits (bounded) until `count` connections have ended.
    bool wait_ended(int count) {
        std::unique_lock lock(mutex_);
        return changed_.wait_for(lock, 10s, [&] { return ended_ >= count; });
    }

private:
    void accept_loop() {
        for (;;) {
            tcp::socket socket(io_);
            beast::error_code ec;
            acceptor_.accept(socket, ec);
            std::lock_guard lock(mutex_);
            if (ec || stopping_) return;
            ++accepted_;
            open_fds_.push_back(socket.native_handle());
            connection_threads_.emplace_back([this, s = std::move(socket)]() mutable { serve(std::move(s)); });
        }
    }

    void serve(tcp::socket socket) {
        auto hold = [this] {
            std::unique_lock lock(mutex_);
            changed_.wait(lock, [&] { return stopping_; });
        };
        std::optional<asio::ssl::stream<tcp::socket&>> tls;
        if (tls_) {
            tls.emplace(socket, *tls_);
            beast::error_code ec;
            tls->handshake(asio::ssl::stream_base::server, ec);
            const char* name = SSL_get_servername(tls->native_handle(), TLSEXT_NAMETYPE_host_name);
            {
                std::lock_guard lock(mutex_);
                server_name_ = name ? name : "";
            }
            if (ec) return finish(socket);
        }
        Peer peer(socket, tls ? &*tls : nullptr, hold);
        beast::flat_buffer buffer;
        for (;;) {
            http::request_parser<http::string_body> parser;
            parser.body_limit(1ull << 30);
            beast::error_code ec;
            http::read(peer, buffer, parser, ec);
            ++peer.requests;
            if (ec || !handler_(parser.get(), peer)) break;
        }
        finish(socket);
    }

    void finish(tcp::socket& socket) {
        std::lock_guard lock(mutex_);
        std::erase(open_fds_, socket.native_handle());
        beast::error_code ec;
        socket.shutdown(tcp::socket::shutdown_both, ec);
        socket.close(ec);
        ++ended_;
        changed_.notify_all();
    }

    Handler handler_;
    asio::io_context io_;
    tcp::acceptor acceptor_{io_};
    std::optional<asio::ssl::context> tls_;
    unsigned short port_ = 0;
    std::thread accept_thread_;
    std::list<std::thread> connection_threads_;
    std::mutex mutex_;
    std::condition_variable changed_;
    std::vector<int> open_fds_;
    bool stopping_ = false;
    std::atomic<int> accepted_ = 0;
    int ended_ = 0;
    std::string server_name_;
};

std::string response(std::string_view body, std::string_view extra_headers = {}) {
    return "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + std::string(extra_headers) +
           "\r\n" + std::string(body);
}

std::string chunked_response(const std::vector<std::string>& chunks) {
    std::string out = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    char size[32];
    for (auto& chunk : chunks) {
        std::snprintf(size, sizeof size, "%zx\r\n", chunk.size());
        out += size + chunk + "\r\n";
    }
    return out + "0\r\n\r\n";
}

RequestHead get(std::string target) { return {"GET", std::move(target), {}, {}, false, {}}; }

std::string read_all(Exchange& exchange) {
    std::string out;
    char piece[4096];
    while (auto n = exchange.read_body(piece)) out.append(piece, n);
    return out;
}

char pattern_byte(std::uint64_t i) { return static_cast<char>((i * 131 + (i >> 13)) & 0xff); }

std::string pattern(std::size_t size, std::uint64_t offset = 0) {
    std::string out(size, '\0');
    for (std::size_t i = 0; i < size; ++i) out[i] = pattern_byte(offset + i);
    return out;
}

template <typename F>
Error::Kind error_kind(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.kind();
    }
    FAIL("no berth::net::Error thrown");
    return Error::Kind::protocol;
}

// Keep-alive answers by target: /cl, /chunked, /head (HEAD), /close, /until-close, /host (echoes Host).
bool basic_routes(const HttpRequest& request, Peer& peer) {
    auto target = request.target();
    if (target == "/cl") return peer.send(response("hello", "X-Answer: cl\r\n"));
    if (target == "/chunked") return peer.send(chunked_response({"he", "llo", " world"}));
    if (target == "/head") return peer.send("HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n");
    if (target == "/close") return peer.send(response("bye", "Connection: close\r\n")) && false;
    if (target == "/until-close") {
        peer.send("HTTP/1.1 200 OK\r\n\r\n" + pattern(100000));
        return false;
    }
    if (target == "/host") return peer.send(response(std::string(request[http::field::host])));
    if (target == "/interim") return peer.send("HTTP/1.1 100 Continue\r\n\r\n" + response("after"));
    return peer.send("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
}

}  // namespace

TEST_CASE("parse_host_port accepts HOST:PORT forms", "[net]") {
    CHECK(parse_host_port("registry.example:5000") == HostPort{"registry.example", "5000"});
    CHECK(parse_host_port("10.0.0.1:1") == HostPort{"10.0.0.1", "1"});
    CHECK(parse_host_port("[::1]:65535") == HostPort{"::1", "65535"});
    CHECK(parse_host_port("[fe80::1:2]:80").str() == "[fe80::1:2]:80");
    CHECK(parse_host_port("host", "443") == HostPort{"host", "443"});
    CHECK(parse_host_port("[::1]", "443") == HostPort{"::1", "443"});
    CHECK(parse_host_port("host:5000", "443").port == "5000");
    CHECK(parse_host_port("a.b:7").str() == "a.b:7");
}

TEST_CASE("parse_host_port rejects malformed addresses", "[net]") {
    for (std::string_view bad :
         {"", "host", "host:", ":80", "host:0", "host:65536", "host:99999999", "host:8a", "::1", "::1:80", "[::1]",
          "[::1]:", "[::1:80", "[]:80", "[host]:80", "[::1]x80", "ho st:80", "host:80:90", "host:-1"})
        CHECK_THROWS_AS(parse_host_port(bad), std::invalid_argument);
    CHECK_THROWS_AS(parse_host_port("::1", "80"), std::invalid_argument);
    CHECK_THROWS_WITH(parse_host_port("::1:80"), Catch::Contains("brackets"));
}

TEST_CASE("parse_url splits scheme, address and path prefix", "[net]") {
    auto url = parse_url("https://registry.example");
    CHECK(url.tls);
    CHECK(url.address == HostPort{"registry.example", "443"});
    CHECK(url.path_prefix.empty());
    url = parse_url("http://h:5000/mirror/v2/");
    CHECK_FALSE(url.tls);
    CHECK(url.address == HostPort{"h", "5000"});
    CHECK(url.path_prefix == "/mirror/v2");
    url = parse_url("HTTP://[::1]/");
    CHECK(url.address == HostPort{"::1", "80"});
    CHECK(url.path_prefix.empty());
    for (std::string_view bad : {"ftp://h", "h:80", "https://", "https://user:pw@h", "http://h/?q=1", "http://h#f",
                                 "http://h:0", "http://::1/"})
        CHECK_THROWS_AS(parse_url(bad), std::invalid_argument);
}

TEST_CASE("sequential keep-alive requests share one pooled connection", "[net]") {
    TestServer server(basic_routes);
    Client client;
    auto r = client.request(server.origin(), get("/cl"));
    CHECK(r.status == 200);
    CHECK(r.body == "hello");
    CHECK(r.content_length == 5u);
    CHECK(r.header("x-ANSWER") == "cl");
    CHECK(r.header("missing").empty());
    r = client.request(server.origin(), get("/chunked"));
    CHECK(r.body == "hello world");
    CHECK_FALSE(r.content_length);
    r = client.request(server.origin(), {"HEAD", "/head", {}, {}, false, {}});
    CHECK(r.status == 200);
    CHECK(r.content_length == 1234u);
    CHECK(r.body.empty());
    r = client.request(server.origin(), get("/host"));
    CHECK(r.body == server.origin().address.str());
    r = client.request(server.origin(), get("/interim"));
    CHECK(r.status == 200);
    CHECK(r.body == "after");
    r = client.request(server.origin(), get("/nothing"));
    CHECK(r.status == 404);
    CHECK(server.accepted() == 1);
}

TEST_CASE("a response with Connection: close or delimited by close is not pooled", "[net]") {
    TestServer server(basic_routes);
    Client client;
    CHECK(client.request(server.origin(), get("/close")).body == "bye");
    CHECK(client.request(server.origin(), get("/cl")).body == "hello");
    CHECK(server.accepted() == 2);
    auto r = client.request(server.origin(), get("/until-close"));
    CHECK(r.body == pattern(100000));
    CHECK_FALSE(r.content_length);
    CHECK(server.accepted() == 2);  // /until-close reused the pooled connection
    CHECK(client.request(server.origin(), get("/cl")).body == "hello");
    CHECK(server.accepted() == 3);
}

TEST_CASE("an exchange abandoned before its body is read closes its connection", "[net]") {
    TestServer server(basic_routes);
    Client client;
    {
        auto exchange = client.open(server.origin(), get("/cl"));
        CHECK(exchange->read_head().status == 200);
    }
    CHECK(server.wait_ended(1));
    CHECK(client.request(server.origin(), get("/cl")).body == "hello");
    CHECK(server.accepted() == 2);
}

TEST_CASE("the pool keeps at most max_idle_per_origin connections", "[net]") {
    TestServer server(basic_routes);
    ClientOptions options;
    options.max_idle_per_origin = 1;
    Client client(options);
    auto concurrent_pair = [&] {
        auto a = client.open(server.origin(), get("/cl"));
        auto b = client.open(server.origin(), get("/cl"));
        CHECK(a->read_head().status == 200);
        CHECK(b->read_head().status == 200);
        CHECK(read_all(*a) == "hello");
        CHECK(read_all(*b) == "hello");
    };
    concurrent_pair();
    CHECK(server.accepted() == 2);
    concurrent_pair();  // one from the pool, one new
    CHECK(server.accepted() == 3);
}

TEST_CASE("idle pooled connections expire", "[net]") {
    TestServer server(basic_routes);
    ClientOptions options;
    options.pool_idle = 100ms;
    Client client(options);
    CHECK(client.request(server.origin(), get("/cl")).body == "hello");
    CHECK(server.wait_ended(1));  // the client closed it, unasked
    CHECK(client.request(server.origin(), get("/cl")).body == "hello");
    CHECK(server.accepted() == 2);
}

TEST_CASE("request() retries once when the pooled connection was closed by the peer", "[net]") {
    SECTION("closed right after the response") {
        TestServer server([](const HttpRequest&, Peer& peer) { return peer.send(response("ok")) && false; });
        Client client;
        CHECK(client.request(server.origin(), get("/a")).body == "ok");
        CHECK(client.request(server.origin(), get("/b")).body == "ok");
        CHECK(server.accepted() == 2);
    }
    SECTION("closed on receiving the next request") {
        // Each connection answers its first request only, as if its idle
        // timeout had struck just when the second arrived.
        TestServer server(
            [](const HttpRequest&, Peer& peer) { return peer.requests == 1 && peer.send(response("ok")); });
        Client client;
        CHECK(client.request(server.origin(), get("/a")).body == "ok");
        CHECK(client.request(server.origin(), {"PUT", "/b", {}, {}, true, {}}, "payload").body == "ok");
        CHECK(server.accepted() == 2);
        // open() does not retry: the caller sees the stale connection.
        auto exchange = client.open(server.origin(), get("/c"));
        CHECK(error_kind([&] { exchange->read_head(); }) == Error::Kind::closed);
    }
}

TEST_CASE("async_request calls back once, on an I/O thread, with the whole answer or the error", "[net]") {
    TestServer server(basic_routes);
    Client client;
    auto answer = [&](RequestHead head) {
        auto result = std::make_shared<std::promise<std::pair<std::exception_ptr, Response>>>();
        auto calls = std::make_shared<std::atomic<int>>(0);
        const auto caller = std::this_thread::get_id();
        auto on_caller = std::make_shared<std::atomic<bool>>(false);
        client.async_request(server.origin(), std::move(head), {}, 64 << 20,
                             [=](std::exception_ptr error, Response response) {
                                 if (++*calls == 1) {
                                     *on_caller = std::this_thread::get_id() == caller;
                                     result->set_value({error, std::move(response)});
                                 }
                             });
        auto got = result->get_future().get();
        CHECK(calls->load() == 1);
        CHECK_FALSE(on_caller->load());
        return got;
    };
    auto [error, response] = answer(get("/chunked"));
    CHECK_FALSE(error);
    CHECK(response.body == "hello world");
    auto [again_error, again] = answer(get("/cl"));
    CHECK_FALSE(again_error);
    CHECK(again.body == "hello");
    CHECK(server.accepted() == 1);  // pooled between the two
    Client elsewhere;
    std::promise<std::exception_ptr> failed;
    elsewhere.async_request({{"127.0.0.1", "1"}, {}}, get("/"), {}, 1024,
                            [&](std::exception_ptr error, Response) { failed.set_value(error); });
    CHECK(error_kind([&] { std::rethrow_exception(failed.get_future().get()); }) == Error::Kind::connect);
}

TEST_CASE("a server that never answers trips the header timeout", "[net]") {
    TestServer server([](const HttpRequest&, Peer& peer) {
        peer.hold();
        return false;
    });
    Client client;
    auto head = get("/stall");
    head.header_timeout = 300ms;
    const auto start = std::chrono::steady_clock::now();
    CHECK(error_kind([&] { client.request(server.origin(), head); }) == Error::Kind::timeout);
    const auto took = std::chrono::steady_clock::now() - start;
    CHECK(took >= 300ms);
    CHECK(took < 1500ms);
}

TEST_CASE("a body that stops arriving trips the idle timeout", "[net]") {
    TestServer server([](const HttpRequest&, Peer& peer) {
        peer.send("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789");
        peer.hold();
        return false;
    });
    ClientOptions options;
    options.idle_timeout = 300ms;
    Client client(options);
    auto exchange = client.open(server.origin(), get("/stall-body"));
    CHECK(exchange->read_head().content_length == 1000u);
    char piece[4096];
    CHECK(exchange->read_body(piece) == 10);
    const auto start = std::chrono::steady_clock::now();
    CHECK(error_kind([&] { exchange->read_body(piece); }) == Error::Kind::timeout);
    CHECK(std::chrono::steady_clock::now() - start < 1500ms);
}

TEST_CASE("connection failures are Error::Kind::connect", "[net]") {
    asio::io_context io;
    tcp::acceptor probe(io, {asio::ip::make_address("127.0.0.1"), 0});
    const auto port = std::to_string(probe.local_endpoint().port());
    probe.close();  // nothing listens there now
    Client client;
    CHECK(error_kind([&] { client.request({{"127.0.0.1", port}, {}}, get("/")); }) == Error::Kind::connect);
    CHECK(error_kind([&] { client.request({{"no-such-host.invalid", "80"}, {}}, get("/")); }) == Error::Kind::connect);
}

TEST_CASE("a connect that gets no answer trips the connect timeout", "[net]") {
    // Linux drops the SYNs to a listener whose accept queue is full, so
    // connecting to it hangs like connecting to an unreachable host.
    asio::io_context io;
    tcp::acceptor listener(io, tcp::v4());
    listener.bind({asio::ip::make_address("127.0.0.1"), 0});
    listener.listen(0);
    tcp::socket queued(io);
    queued.connect(listener.local_endpoint());  // fills the queue, never accepted
    ClientOptions options;
    options.connect_timeout = 300ms;
    Client client(options);
    const auto start = std::chrono::steady_clock::now();
    CHECK(error_kind([&] {
              client.request({{"127.0.0.1", std::to_string(listener.local_endpoint().port())}, {}}, get("/"));
          }) == Error::Kind::timeout);
    CHECK(std::chrono::steady_clock::now() - start < 1500ms);
}

TEST_CASE("a response body over body_limit is Error::Kind::too_large", "[net]") {
    TestServer server([](const HttpRequest&, Peer& peer) { return peer.send(response(pattern(5000))); });
    Client client;
    CHECK(client.request(server.origin(), get("/"), {}, 5000).body.size() == 5000);
    CHECK(error_kind([&] { client.request(server.origin(), get("/"), {}, 4999); }) == Error::Kind::too_large);
}

TEST_CASE("a chunked request body is streamed piece by piece", "[net]") {
    std::string transfer_encoding;
    TestServer server([&](const HttpRequest& request, Peer& peer) {
        transfer_encoding = std::string(request[http::field::transfer_encoding]);
        return peer.send(response(request.body()));
    });
    Client client;
    const auto sent = pattern(5 * 1024 * 1024 + 123);
    auto exchange = client.open(server.origin(), {"POST", "/echo", {{"Content-Type", "x/y"}}, {}, true, {}});
    for (std::size_t offset = 0, size = 1; offset < sent.size(); offset += size, size = size * 3 % 200000 + 1)
        exchange->write(std::span(sent).subspan(offset, std::min(size, sent.size() - offset)));
    exchange->end_request();
    CHECK(exchange->read_head().content_length == sent.size());
    CHECK(read_all(*exchange) == sent);
    CHECK(transfer_encoding == "chunked");
}

TEST_CASE("a request body with Content-Length must match it", "[net]") {
    TestServer server([](const HttpRequest& request, Peer& peer) { return peer.send(response(request.body())); });
    Client client;
    {
        auto exchange = client.open(server.origin(), {"PUT", "/echo", {}, 10, true, {}});
        exchange->write(std::string_view("01234"));
        CHECK_THROWS_AS(exchange->write(std::string_view("567890")), std::logic_error);
        CHECK_THROWS_AS(exchange->end_request(), std::logic_error);
        exchange->write(std::string_view("56789"));
        exchange->end_request();
        CHECK_THROWS_AS(exchange->write(std::string_view("x")), std::logic_error);
        exchange->read_head();
        CHECK(read_all(*exchange) == "0123456789");
    }
    CHECK(client.request(server.origin(), {"PUT", "/empty", {}, 0, false, {}}).body.empty());
    CHECK(server.accepted() == 1);
}

TEST_CASE("a large response is streamed into the caller's buffer", "[net]") {
    constexpr std::uint64_t total = 64ull << 20;
    std::atomic<std::uint64_t> written = 0;
    TestServer server([&](const HttpRequest&, Peer& peer) {
        if (!peer.send("HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(total) + "\r\n\r\n")) return false;
        constexpr std::size_t piece = 256 * 1024;
        for (std::uint64_t offset = 0; offset < total; offset += piece) {
            if (!peer.send(pattern(piece, offset))) return false;
            written += piece;
        }
        return true;
    });
    Client client;
    auto exchange = client.open(server.origin(), get("/big"));
    CHECK(exchange->read_head().content_length == total);
    std::vector<char> buffer(64 * 1024);
    std::uint64_t received = 0, mismatches = 0, ahead_max = 0;
    std::size_t largest = 0;
    while (auto n = exchange->read_body(buffer)) {
        largest = std::max(largest, n);
        for (std::size_t i = 0; i < n; ++i) mismatches += buffer[i] != pattern_byte(received + i);
        received += n;
        // The server is held back by what the client has not yet read.
        ahead_max = std::max(ahead_max, written.load() - std::min(written.load(), received));
    }
    CHECK(received == total);
    CHECK(largest == buffer.size());
    CHECK(mismatches == 0);
    CHECK(ahead_max < 32ull << 20);
}

TEST_CASE("the asynchronous interface streams both ways", "[net]") {
    TestServer server([](const HttpRequest& request, Peer& peer) {
        return peer.send(chunked_response({request.body().substr(0, 1000), request.body().substr(1000)}));
    });
    Client client;
    const auto sent = pattern(300000);
    struct Run {
        std::unique_ptr<Exchange> exchange;
        std::size_t offset = 0;
        std::array<char, 777> piece;
        std::string received;
        int status = 0;
        std::promise<void> finished;
    } run;
    auto fail = [&](std::exception_ptr error) { run.finished.set_exception(error); };
    std::function<void()> read_body = [&] {
        run.exchange->async_read_body(run.piece, [&](std::exception_ptr error, std::size_t n) {
            if (error) return fail(error);
            if (n == 0) {
                run.exchange.reset();  // on the I/O thread, inside a callback
                return run.finished.set_value();
            }
            run.received.append(run.piece.data(), n);
            read_body();
        });
    };
    std::function<void()> write_next = [&] {
        if (run.offset == sent.size()) {
            return run.exchange->async_end_request([&](std::exception_ptr error) {
                if (error) return fail(error);
                run.exchange->async_read_head([&](std::exception_ptr error, const ResponseHead* head) {
                    if (error) return fail(error);
                    run.status = head->status;
                    read_body();
                });
            });
        }
        const auto size = std::min<std::size_t>(4096, sent.size() - run.offset);
        run.exchange->async_write(std::span(sent).subspan(run.offset, size), [&, size](std::exception_ptr error) {
            if (error) return fail(error);
            run.offset += size;
            write_next();
        });
    };
    client.async_open(server.origin(), {"POST", "/echo", {}, {}, true, {}},
                      [&](std::exception_ptr error, std::unique_ptr<Exchange> exchange) {
                          if (error) return fail(error);
                          run.exchange = std::move(exchange);
                          write_next();
                      });
    run.finished.get_future().get();
    CHECK(run.status == 200);
    CHECK(run.received == sent);
}

TEST_CASE("several threads share a client with several I/O threads", "[net]") {
    TestServer server([](const HttpRequest& request, Peer& peer) { return peer.send(response(request.body())); });
    ClientOptions options;
    options.io_threads = 2;
    options.max_idle_per_origin = 4;
    Client client(options);
    std::atomic<int> wrong = 0;
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            for (int i = 0; i < 50; ++i) {
                auto body = pattern(1000 + 37 * i, t * 100000 + i);
                if (client.request(server.origin(), {"POST", "/", {}, {}, true, {}}, body).body != body) ++wrong;
            }
        });
    for (auto& thread : threads) thread.join();
    CHECK(wrong == 0);
    CHECK(server.accepted() <= 8);  // connections were pooled, not one per request
}

TEST_CASE("blocking calls on the client's I/O thread are refused", "[net]") {
    TestServer server(basic_routes);
    Client client;
    std::promise<bool> refused;
    client.async_open(server.origin(), get("/cl"), [&](std::exception_ptr error, std::unique_ptr<Exchange> exchange) {
        if (error) return refused.set_exception(error);
        try {
            exchange->read_head();
            refused.set_value(false);
        } catch (const std::logic_error&) {
            refused.set_value(true);
        }
    });
    CHECK(refused.get_future().get());
}

TEST_CASE("the client may go before its exchanges", "[net]") {
    TestServer server([](const HttpRequest&, Peer& peer) {
        peer.hold();
        return false;
    });
    std::unique_ptr<Exchange> exchange;
    std::promise<std::exception_ptr> head_read;
    {
        Client client;
        exchange = client.open(server.origin(), get("/stall"));
        exchange->async_read_head([&](std::exception_ptr error, const ResponseHead*) { head_read.set_value(error); });
    }  // fails the read in flight
    auto error = head_read.get_future().get();
    CHECK_THROWS_AS(std::rethrow_exception(error), Error);
    CHECK_THROWS_AS(exchange->read_head(), Error);  // refused, not hanging
    exchange.reset();
}

// ---- TLS ----

namespace {

// A CA, a server certificate for localhost and 127.0.0.1, and a client
// certificate, made once per run with the openssl command line.
struct Certs {
    std::filesystem::path dir;
    std::string ca, server_cert, server_key, client_cert, client_key;

    Certs() {
        char name[] = "/tmp/berth-net-test-XXXXXX";
        if (!::mkdtemp(name)) throw std::runtime_error("mkdtemp failed");
        dir = name;
        auto path = [&](const char* file) { return (dir / file).string(); };
        std::ofstream(path("server.ext")) << "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n";
        std::ofstream(path("client.ext")) << "extendedKeyUsage=clientAuth\n";
        const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
        const std::string sign = " -CA ca.crt -CAkey ca.key -CAcreateserial -days 2";
        const std::string script = "cd " + dir.string() + " && openssl req -x509" + key +
                                   " -keyout ca.key -out ca.crt -days 2 -subj /CN=berth-test-ca && openssl req" + key +
                                   " -keyout server.key -out server.csr -subj /CN=localhost && openssl x509 -req" +
                                   sign + " -in server.csr -extfile server.ext -out server.crt && openssl req" + key +
                                   " -keyout client.key -out client.csr -subj /CN=berth-test-client && openssl x509"
                                   " -req" +
                                   sign + " -in client.csr -extfile client.ext -out client.crt";
        if (std::system(("(" + script + ") >/dev/null 2>&1").c_str()) != 0) throw std::runtime_error("openssl failed");
        ca = path("ca.crt");
        server_cert = path("server.crt");
        server_key = path("server.key");
        client_cert = path("client.crt");
        client_key = path("client.key");
    }
    ~Certs() {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    }
};

const Certs& certs() {
    static const Certs made;
    return made;
}

}  // namespace

TEST_CASE("TLS verifies the server against a CA file", "[net][tls]") {
    TestServer server(basic_routes, ServerTls{certs().server_cert, certs().server_key, {}});
    Client client;
    TlsOptions tls{true, certs().ca, false, {}, {}, {}};
    auto r = client.request(server.origin(tls), get("/cl"));
    CHECK(r.body == "hello");
    CHECK(client.request(server.origin(tls), get("/chunked")).body == "hello world");
    CHECK(server.accepted() == 1);
    CHECK(server.last_server_name().empty());  // no SNI for an IP address

    SECTION("SNI carries the server name, which is verified") {
        tls.server_name = "localhost";
        CHECK(client.request(server.origin(tls), get("/cl")).body == "hello");
        CHECK(server.last_server_name() == "localhost");
        CHECK(server.accepted() == 2);  // another TLS identity, another pool
        tls.server_name = "other.example";
        CHECK(error_kind([&] { client.request(server.origin(tls), get("/cl")); }) == Error::Kind::tls);
    }
    SECTION("an unknown CA fails, unless verification is off") {
        tls.ca_file.clear();
        CHECK(error_kind([&] { client.request(server.origin(tls), get("/cl")); }) == Error::Kind::tls);
        tls.insecure = true;
        CHECK(client.request(server.origin(tls), get("/cl")).body == "hello");
    }
    SECTION("a missing CA file is a TLS error") {
        tls.ca_file = (certs().dir / "missing.crt").string();
        CHECK(error_kind([&] { client.request(server.origin(tls), get("/cl")); }) == Error::Kind::tls);
    }
}

TEST_CASE("TLS client certificates", "[net][tls]") {
    TestServer server(basic_routes, ServerTls{certs().server_cert, certs().server_key, certs().ca});
    Client client;
    TlsOptions tls{true, certs().ca, false, {}, {}, "localhost"};
    CHECK(error_kind([&] { client.request(server.origin(tls), get("/cl")); }) == Error::Kind::tls);
    tls.cert_file = certs().client_cert;
    tls.key_file = certs().client_key;
    CHECK(client.request(server.origin(tls), get("/cl")).body == "hello");
}

TEST_CASE("a large body streams over TLS", "[net][tls]") {
    TestServer server([](const HttpRequest& request, Peer& peer) { return peer.send(response(request.body())); },
                      ServerTls{certs().server_cert, certs().server_key, {}});
    Client client;
    const auto sent = pattern(3 * 1024 * 1024);
    auto exchange =
        client.open(server.origin({true, certs().ca, false, {}, {}, {}}), {"PUT", "/", {}, sent.size(), true, {}});
    for (std::size_t offset = 0; offset < sent.size(); offset += 100000)
        exchange->write(std::span(sent).subspan(offset, std::min<std::size_t>(100000, sent.size() - offset)));
    exchange->end_request();
    CHECK(exchange->read_head().status == 200);
    CHECK(read_all(*exchange) == sent);
}
