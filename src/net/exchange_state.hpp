#pragma once
// One request/response on one connection. Every member function runs on the
// connection's strand; the public Exchange only posts to it.
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/serializer.hpp>

#include "core.hpp"

namespace berth::net {

namespace http = boost::beast::http;

// An Error of kind closed on a pooled connection before any byte of the
// response: the peer had closed it while idle, so the request may be sent
// again on a new one. Client::request retries on it.
class StaleConnection : public Error {
    using Error::Error;
};

struct Exchange::State : std::enable_shared_from_this<Exchange::State> {
    using Done = std::function<void(std::exception_ptr)>;

    State(std::shared_ptr<Core> core, std::shared_ptr<Connection> connection, const Origin& origin, RequestHead head);

    // Writes the request head (and finishes a body-less request).
    void start(Done done);
    void write(std::span<const char> piece, Done done);
    void end_request(Done done);
    void read_head(std::function<void(std::exception_ptr, const ResponseHead*)> done);
    void read_body(std::span<char> into, std::function<void(std::exception_ptr, std::size_t)> done);
    // Pools or closes the connection; once.
    void release();

    const std::shared_ptr<Core> core;
    const std::shared_ptr<Connection> connection;

private:
    std::exception_ptr fail(const boost::system::error_code& ec, const std::string& doing);
    void read_header_skipping_interim(std::function<void(std::exception_ptr, const ResponseHead*)> done);
    void write_serializer(Done done, std::size_t piece);
    void read_raw_body(std::span<char> into, std::function<void(std::exception_ptr, std::size_t)> done);
    void read_raw_more(std::span<char> into, std::size_t got,
                       std::function<void(std::exception_ptr, std::size_t)> done);
    bool reusable();  // the serializer has no const is_done

    std::string what_;  // "GET host:port/target", for messages
    std::chrono::milliseconds header_timeout_;
    http::request<http::buffer_body> request_;
    std::optional<http::request_serializer<http::buffer_body>> serializer_;
    bool body_expected_ = false;
    std::optional<std::uint64_t> remaining_;  // of the Content-Length
    std::optional<http::response_parser<http::buffer_body>> parser_;
    // Of a Content-Length body, which is read past the parser straight into the
    // caller's buffer: a socket read then brings what has arrived, however much.
    std::optional<std::uint64_t> body_left_;
    ResponseHead head_;
    bool head_read_ = false;
    bool failed_ = false;
    bool released_ = false;
};

}  // namespace berth::net
