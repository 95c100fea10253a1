#pragma once
// berth's HTTP/1.1 client: asynchronous at its core, run by a few I/O threads
// of its own, with pooled keep-alive connections per origin, TLS, timeouts, and
// request and response bodies streamed with backpressure. Blocking wrappers
// serve worker and replication threads.
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "berth/net/host_port.hpp"

namespace berth::net {

struct TlsOptions {
    bool enabled = false;
    std::string ca_file;              // empty: the system's default verify paths
    bool insecure = false;            // no verification of the server at all
    std::string cert_file, key_file;  // client certificate (PEM chain) and key, for mTLS
    std::string server_name;          // SNI and the name verified; empty: the host
};

struct Origin {
    HostPort address;
    TlsOptions tls;
};

struct ClientOptions {
    std::chrono::milliseconds connect_timeout{2000};  // resolve + connect + TLS handshake
    std::chrono::milliseconds header_timeout{10000};  // read_head: until the response head is in
    std::chrono::milliseconds idle_timeout{30000};    // any single write or body read making no progress
    std::size_t max_idle_per_origin = 8;
    // Milliseconds rather than seconds so tests can expire connections quickly;
    // std::chrono::seconds converts implicitly.
    std::chrono::milliseconds pool_idle{50000};
    unsigned io_threads = 1;
    bool background = false;  // its I/O threads run_in_background() (background.hpp)
};

using Headers = std::vector<std::pair<std::string, std::string>>;

struct RequestHead {
    std::string method;
    std::string target;
    Headers headers;  // Host is added (host:port) unless present; framing headers are the client's
    // Set: a body of exactly this many bytes (0 for an empty PUT/POST). Unset
    // with has_body: a chunked body of unknown length. Neither: no body.
    std::optional<std::uint64_t> content_length;
    bool has_body = false;
    std::optional<std::chrono::milliseconds> header_timeout;  // overrides ClientOptions::header_timeout
};

struct ResponseHead {
    int status = 0;
    Headers headers;
    std::optional<std::uint64_t> content_length;  // the Content-Length header, also on HEAD responses

    std::string header(std::string_view name) const;  // case-insensitive; "" if absent
};

struct Response : ResponseHead {
    std::string body;
};

class Error : public std::runtime_error {
public:
    enum class Kind {
        connect,    // resolving or connecting failed
        tls,        // TLS setup, handshake, verification or alert
        timeout,    // connect, header or idle timeout
        closed,     // the peer closed or reset the connection
        protocol,   // malformed HTTP from the peer
        too_large,  // Client::request: the body exceeded body_limit
    };
    Error(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
    Kind kind() const noexcept { return kind_; }

private:
    Kind kind_;
};

// One request and its response on one connection, pooled or new. Each of the
// request side (write, end_request) and the response side (read_head,
// read_body) takes one operation at a time; the two sides may overlap.
// Asynchronous callbacks run on a client I/O thread and must not block.
class Exchange {
public:
    struct State;
    explicit Exchange(std::shared_ptr<State> state);
    Exchange(const Exchange&) = delete;
    Exchange& operator=(const Exchange&) = delete;
    // Returns the connection to the pool if request and response were
    // complete and the response keep-alive; otherwise closes it (an operation
    // in flight then fails). Safe at any point, from any thread.
    ~Exchange();

    // `piece` must stay valid until `done` runs. More bytes than the
    // Content-Length is a std::logic_error.
    void async_write(std::span<const char> piece, std::function<void(std::exception_ptr)> done);
    // The last chunk when chunked; checks the Content-Length was met.
    void async_end_request(std::function<void(std::exception_ptr)> done);
    // 1xx interim responses are skipped. The head stays valid as long as the Exchange.
    void async_read_head(std::function<void(std::exception_ptr, const ResponseHead*)> done);
    // After read_head. `into` must be non-empty and stay valid until `done`;
    // n == 0 without error: the body is complete.
    void async_read_body(std::span<char> into, std::function<void(std::exception_ptr, std::size_t n)> done);

    // Blocking forms, for threads other than the client's I/O threads (a
    // std::logic_error there). They throw what the callbacks would receive.
    void write(std::span<const char> piece);
    void end_request();
    const ResponseHead& read_head();
    std::size_t read_body(std::span<char> into);

private:
    std::shared_ptr<State> state_;
};

class Client {
public:
    explicit Client(ClientOptions options = {});
    // Fails what is in flight, closes every connection and stops the I/O
    // threads. Exchanges may outlive the Client, but only to be destroyed.
    ~Client();
    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;

    // Takes a pooled connection to the origin, or connects, then writes the
    // request head. A body-less request is then complete; otherwise the
    // caller writes the body and ends the request.
    void async_open(const Origin& origin, RequestHead head,
                    std::function<void(std::exception_ptr, std::unique_ptr<Exchange>)> done);
    std::unique_ptr<Exchange> open(const Origin& origin, RequestHead head);

    // The whole exchange with a small body each way. Content-Length is set
    // from `body` when it is non-empty or head.has_body. A response body over
    // body_limit is Error::Kind::too_large. Retries once on a new connection
    // when a pooled one turns out closed before any byte of a response arrived.
    Response request(const Origin& origin, RequestHead head, std::string body = {}, std::size_t body_limit = 64 << 20);
    // The same without a waiting thread: `done` runs once, on an I/O thread.
    using ResponseDone = std::function<void(std::exception_ptr, Response)>;
    void async_request(const Origin& origin, RequestHead head, std::string body, std::size_t body_limit,
                       ResponseDone done);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace berth::net
