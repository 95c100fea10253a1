// Reading S3's answers (answers.hpp).
#include "answers.hpp"

#include <charconv>
#include <limits>
#include <optional>

namespace berth::s3 {
namespace {

struct ContentRange {
    std::uint64_t first = 0, last = 0;
    std::optional<std::uint64_t> total;  // nullopt: "*"
};

std::optional<std::uint64_t> number(std::string_view text) {
    std::uint64_t value = 0;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return value;
}

// "bytes FIRST-LAST/TOTAL" or "bytes FIRST-LAST/*" (RFC 9110).
std::optional<ContentRange> parse_content_range(std::string_view text) {
    if (!text.starts_with("bytes ")) return std::nullopt;
    text.remove_prefix(6);
    const auto dash = text.find('-'), slash = text.find('/');
    if (dash == std::string_view::npos || slash == std::string_view::npos || dash > slash) return std::nullopt;
    auto first = number(text.substr(0, dash)), last = number(text.substr(dash + 1, slash - dash - 1));
    if (!first || !last || *last < *first) return std::nullopt;
    ContentRange range{*first, *last, std::nullopt};
    if (text.substr(slash + 1) != "*") {
        range.total = number(text.substr(slash + 1));
        if (!range.total || *range.total <= *last) return std::nullopt;
    }
    return range;
}

[[noreturn]] void wrong_answer(const net::ResponseHead& head, const std::string& what, const std::string& why) {
    throw Error(head.status, "", what + ": " + why, false);
}

// Whether S3 asks to be asked again later.
bool retryable(int status, std::string_view code) {
    if (status >= 500 || status == 429 || status == 408) return true;
    return code == "SlowDown" || code == "RequestTimeout" || code == "InternalError" || code == "ServiceUnavailable";
}

}  // namespace

Error failure(int status, std::string_view body, const std::string& what) {
    const auto document = xml::parse_error(body);
    std::string code = document ? document->code : std::string();
    std::string message = what + ": answered " + std::to_string(status);
    if (!code.empty()) message += " " + code;
    if (document && !document->message.empty()) message += " (" + document->message.substr(0, 512) + ")";
    const bool again = retryable(status, code);
    return Error(status, std::move(code), message, again);
}

Error transport_failure(const net::Error& error, const std::string& what) {
    using Kind = net::Error::Kind;
    const bool again = error.kind() == Kind::connect || error.kind() == Kind::timeout || error.kind() == Kind::closed;
    return Error(0, "", what + ": " + error.what(), again);
}

std::string small_body(net::Exchange& exchange) {
    std::string body;
    char buffer[16384];
    try {
        while (body.size() < max_answer_bytes) {
            const auto n = exchange.read_body({buffer, std::min(sizeof buffer, max_answer_bytes - body.size())});
            if (n == 0) break;
            body.append(buffer, n);
        }
    } catch (const net::Error&) {
        // The status says what went wrong; a body cut short only loses the detail.
    }
    return body;
}

std::uint64_t bytes_to_read(const net::ResponseHead& head, std::uint64_t offset, std::uint64_t length,
                            const std::string& what) {
    const auto max = std::numeric_limits<std::uint64_t>::max();
    const std::uint64_t last_asked = length > max - offset ? max : offset + length - 1;
    if (head.status == 200) {
        // The whole object, the Range not applied: fine from its start, and read only as far as asked.
        if (offset != 0) wrong_answer(head, what, "the whole object for a range from " + std::to_string(offset));
        if (!head.content_length) wrong_answer(head, what, "200 without a Content-Length");
        return std::min(*head.content_length, length);
    }
    const auto range = parse_content_range(head.header("content-range"));
    if (!range) wrong_answer(head, what, "206 without a readable Content-Range: " + head.header("content-range"));
    const auto count = range->last - range->first + 1;
    if (range->first != offset || range->last > last_asked)
        wrong_answer(head, what,
                     "bytes " + head.header("content-range") + " for " + std::to_string(offset) + "-" +
                         std::to_string(last_asked));
    // Less than asked only where the object ends.
    if (range->last < last_asked && (!range->total || range->last + 1 != *range->total))
        wrong_answer(head, what, "a short range: " + head.header("content-range"));
    if (head.content_length && *head.content_length != count)
        wrong_answer(head, what,
                     "Content-Length " + std::to_string(*head.content_length) + " for " + head.header("content-range"));
    return count;
}

}  // namespace berth::s3
