// The request path as a session takes it: Beast's request_parser<buffer_body>
// (16 KiB header limit, body read into a fixed chunk as session.cpp does),
// then the router on the parsed target, the query, and the Range and
// Content-Range headers. Nothing may crash, and routing must be consistent: a
// repository route's name and reference, when valid, route back to the same
// place from the canonical URL.
//
// Input: the raw bytes of a request, read twice: all at once, then in small
// pieces (as they may arrive from a socket).
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http.hpp>

#include "berth/net/host_port.hpp"
#include "berth/oci/digest.hpp"
#include "berth/oci/error.hpp"
#include "berth/oci/names.hpp"
#include "berth/replication/protocol.hpp"
#include "fuzz_check.hpp"
#include "http/ranges.hpp"
#include "http/router.hpp"

namespace {

namespace bhttp = boost::beast::http;
using berth::http::Target;

// The routes whose path names a repository (/v2/NAME/...).
bool repository_route(const Target& target) { return target.route->pattern.find("{name}") != std::string_view::npos; }

std::optional<std::string> canonical_target(const Target& target) {
    const std::string base = "/v2/" + target.name;
    const auto label = target.route->label;
    if (label == "tags") return base + "/tags/list";
    if (label == "manifest") return base + "/manifests/" + target.reference;
    if (label == "blob") return base + "/blobs/" + target.reference;
    if (label == "upload_start") return base + "/blobs/uploads/";
    if (label == "upload") return base + "/blobs/uploads/" + target.reference;
    if (label == "referrers") return base + "/referrers/" + target.reference;
    return std::nullopt;
}

bool valid_reference(const Target& target) {
    const auto label = target.route->label;
    const auto& reference = target.reference;
    if (label == "manifest") return berth::oci::valid_tag(reference) || berth::oci::Digest::parse(reference);
    if (label == "blob" || label == "referrers") return berth::oci::Digest::parse(reference).has_value();
    if (label == "upload") return berth::oci::valid_tag(reference);  // ids are of that alphabet
    return true;
}

void check_target(std::string_view text) {
    auto parsed = berth::http::parse_target(text);
    if (text.empty() || text[0] != '/') FUZZ_CHECK(!parsed);
    if (!parsed) return;
    const auto& target = *parsed;
    const auto label = target.route->label;
    const auto path = text.substr(0, text.find('?'));
    FUZZ_CHECK(target.raw_query.empty() == (path.size() == text.size()));

    if (repository_route(target)) {
        FUZZ_CHECK(path.starts_with("/v2/"));
        // Without empty segments or escapes, every repository route names one.
        const bool plain = path.find("//") == std::string_view::npos && path.find('%') == std::string_view::npos;
        const bool takes_reference = target.route->pattern.ends_with("{reference}");
        if (plain) FUZZ_CHECK(!target.name.empty());
        if (plain && !path.ends_with("/") && takes_reference) FUZZ_CHECK(!target.reference.empty());
        if (!takes_reference) FUZZ_CHECK(target.reference.empty());

        // A valid name and reference route back to the same place from the
        // canonical URL: the router has no ambiguity a client could hit.
        if (berth::oci::valid_repository_name(target.name) && valid_reference(target)) {
            auto canonical = canonical_target(target);
            FUZZ_CHECK(canonical);
            auto again = berth::http::parse_target(*canonical);
            FUZZ_CHECK(again);
            FUZZ_CHECK(again->route == target.route);
            FUZZ_CHECK(again->name == target.name);
            FUZZ_CHECK(again->reference == target.reference);
        }
    } else if (target.route->name_param.empty()) {
        FUZZ_CHECK(target.name.empty());
    }
    // {rest} matches no segment too ("/ui" is the UI's page): "/_berth/v1" reaches the peer
    // service with nothing to ask, which it does not know.
    const auto peer_prefix = berth::replication::protocol::prefix;
    if (label == "peer")
        FUZZ_CHECK(path.starts_with(peer_prefix) || path == peer_prefix.substr(0, peer_prefix.size() - 1));

    // What the handlers ask of a query.
    for (const char* key : {"n", "last", "digest", "mount", "from", "artifactType", "scope", "service"}) {
        auto first = target.query.get(key);
        auto all = target.query.all(key);
        FUZZ_CHECK(first.has_value() == !all.empty());
        if (first) FUZZ_CHECK(*first == all.front());
    }
    // Encoding a decoded value and decoding it again is the identity.
    for (auto& value : target.query.all("digest")) {
        auto decoded = berth::http::percent_decode(berth::net::query_escape(value), true);
        FUZZ_CHECK(decoded && *decoded == value);
    }
}

void check_headers(const bhttp::request_parser<bhttp::buffer_body>& parser) {
    const auto& head = parser.get();
    (void)head.keep_alive();
    (void)head.method_string();
    (void)boost::beast::iequals(head[bhttp::field::expect], "100-continue");
    (void)parser.content_length();
    check_target(head.target());
    for (std::uint64_t size :
         {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{4096}, std::numeric_limits<std::uint64_t>::max()}) {
        try {
            auto range = berth::http::parse_range(head[bhttp::field::range], size);
            if (range) FUZZ_CHECK(range->length > 0 && range->first < size && range->length <= size - range->first);
        } catch (const berth::oci::Error& error) {
            FUZZ_CHECK(error.code() == berth::oci::ErrorCode::range_not_satisfiable);
        }
    }
    if (auto chunk = berth::http::parse_content_range(head[bhttp::field::content_range]))
        FUZZ_CHECK(chunk->first <= chunk->last);
}

// Feeds `input` to a fresh parser `piece` bytes at a time, keeping what the
// parser has not consumed, as a flat_buffer would.
void parse(std::string_view input, std::size_t piece) {
    bhttp::request_parser<bhttp::buffer_body> parser;
    parser.header_limit(16 * 1024);
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    char chunk[512];
    std::string pending;
    std::size_t offset = 0;
    bool header_seen = false;
    std::uint64_t body_bytes = 0;
    for (int rounds = 0; rounds < 100000; ++rounds) {
        boost::beast::error_code ec;
        if (pending.empty() && offset < input.size()) {
            auto take = std::min(piece, input.size() - offset);
            pending.append(input.substr(offset, take));
            offset += take;
        }
        if (header_seen) {
            auto& body = parser.get().body();
            if (body.data == nullptr || body.size == 0) {
                body.data = chunk;
                body.size = sizeof chunk;
            }
        }
        const std::size_t before = header_seen ? parser.get().body().size : 0;
        std::size_t used = 0;
        if (pending.empty()) {
            parser.put_eof(ec);
        } else {
            used = parser.put(boost::asio::buffer(pending.data(), pending.size()), ec);
            FUZZ_CHECK(used <= pending.size());
            pending.erase(0, used);
        }
        if (header_seen) {
            auto& body = parser.get().body();
            FUZZ_CHECK(body.size <= before);
            body_bytes += before - body.size;
            if (body.size == 0) body.data = nullptr;  // full: the session hands it on
        }
        if (!header_seen && parser.is_header_done()) {
            header_seen = true;
            check_headers(parser);
        }
        if (ec == bhttp::error::need_buffer) continue;
        if (ec == bhttp::error::need_more) {
            if (offset >= input.size() && pending.empty()) {
                parser.put_eof(ec);
                break;
            }
            if (offset < input.size()) {  // more bytes behind what is pending
                auto take = std::min(piece, input.size() - offset);
                pending.append(input.substr(offset, take));
                offset += take;
            } else if (used == 0) {
                break;  // the parser wants bytes that will never come
            }
            continue;
        }
        if (ec || parser.is_done()) break;
        if (used == 0 && pending.empty() && offset >= input.size()) break;
    }
    if (parser.is_done() && parser.content_length()) FUZZ_CHECK(body_bytes == *parser.content_length());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    parse(input, input.size() ? input.size() : 1);
    parse(input, 7);
    // The target alone, as the router would see the request line's second word.
    check_target(input.substr(0, std::min<std::size_t>(input.size(), 4096)));
    return 0;
}
