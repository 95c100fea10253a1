#include "request_head.hpp"

#include "berth/replication/protocol.hpp"

namespace berth::http {
namespace {

namespace bhttp = boost::beast::http;
namespace protocol = replication::protocol;

Method method_of(bhttp::verb verb) {
    switch (verb) {
        case bhttp::verb::get: return Method::get;
        case bhttp::verb::head: return Method::head;
        case bhttp::verb::put: return Method::put;
        case bhttp::verb::post: return Method::post;
        case bhttp::verb::patch: return Method::patch;
        case bhttp::verb::delete_: return Method::del;
        default: return Method::other;
    }
}

}  // namespace

std::optional<Request> request_from_head(const bhttp::request_header<>& head,
                                         std::optional<std::uint64_t> content_length, bool has_body,
                                         const std::string& peer, bool secure) {
    auto target = parse_target(head.target());
    if (!target) return std::nullopt;
    Request request;
    request.method = method_of(head.method());
    request.target = std::move(*target);
    request.content_type = std::string(head[bhttp::field::content_type]);
    request.content_range = std::string(head[bhttp::field::content_range]);
    request.range = std::string(head[bhttp::field::range]);
    request.content_length = content_length;
    request.has_body = has_body;
    request.authorization = std::string(head[bhttp::field::authorization]);
    request.host = std::string(head[bhttp::field::host]);
    request.cookie = std::string(head[bhttp::field::cookie]);
    request.origin = std::string(head[bhttp::field::origin]);
    request.fetch_site = std::string(head["Sec-Fetch-Site"]);
    request.forwarded_host = std::string(head["X-Forwarded-Host"]);
    request.peer_address = peer;
    request.secure = secure;
    request.peer_secret = std::string(head[protocol::header::secret]);
    request.peer_origin = std::string(head[protocol::header::replica]);
    request.peer_versions = std::string(head[protocol::header::versions]);
    request.forwarded = !head[protocol::header::forwarded].empty();
    return request;
}

}  // namespace berth::http
