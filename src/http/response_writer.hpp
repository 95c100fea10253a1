#pragma once
// Writes a request's answer on a connection (session.cpp), with berth's headers: a string body, a
// head alone (a HEAD, or an answer whose length is all it says), or a file (a blob) sent by
// file_sender.hpp.
#include <unistd.h>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <functional>
#include <memory>
#include <optional>

#include "context.hpp"
#include "file_sender.hpp"
#include "message.hpp"

namespace berth::http {

template <typename Stream>
class ResponseWriter {
public:
    ResponseWriter(Stream& stream, ServerContext& context) : stream_(stream), file_sender_(stream, context) {}

    // Writes response, then done(ok) on the connection's thread. owner keeps the connection alive
    // meanwhile. Returns the body bytes it means to send.
    std::uint64_t write(Response response, bool keep_alive, std::shared_ptr<void> owner,
                        std::function<void(bool ok)> done) {
        namespace bhttp = boost::beast::http;
        auto fill = [&](auto& message) {
            message.result(static_cast<unsigned>(response.status));
            message.version(11);
            message.set(bhttp::field::server, "berth");
            message.set("Docker-Distribution-API-Version", "registry/2.0");
            for (auto& [name, value] : response.headers) message.insert(name, value);
            message.keep_alive(keep_alive);
        };
        auto written = [owner, done](boost::beast::error_code ec, std::size_t) { done(!ec); };
        if (response.file) {
            auto& message = head_response_.emplace();
            fill(message);
            message.content_length(response.file->length);
            head_serializer_.emplace(message);
            bhttp::async_write_header(
                stream_, *head_serializer_,
                [this, owner, done, file = *response.file](boost::beast::error_code ec, std::size_t) {
                    if (ec) return done(false);
                    file_sender_.send(file, owner, done);
                });
            return response.file->length;
        }
        if (response.head_length) {
            auto& message = head_response_.emplace();
            fill(message);
            message.content_length(*response.head_length);
            head_serializer_.emplace(message);
            bhttp::async_write_header(stream_, *head_serializer_, written);
            return 0;
        }
        auto& message = string_response_.emplace();
        fill(message);
        const auto bytes = response.body.size();
        message.body() = std::move(response.body);
        message.prepare_payload();
        bhttp::async_write(stream_, message, written);
        return bytes;
    }

    // Bytes of a file promised but not sent: a body cut short counts what was sent.
    std::uint64_t unsent() const { return file_sender_.unsent(); }
    void close_file() { file_sender_.close(); }
    // Between requests.
    void reset() {
        head_response_.reset();
        string_response_.reset();
        head_serializer_.reset();
    }

private:
    Stream& stream_;
    std::optional<boost::beast::http::response<boost::beast::http::empty_body>> head_response_;
    std::optional<boost::beast::http::response_serializer<boost::beast::http::empty_body>> head_serializer_;
    std::optional<boost::beast::http::response<boost::beast::http::string_body>> string_response_;
    FileSender<Stream> file_sender_;
};

}  // namespace berth::http
