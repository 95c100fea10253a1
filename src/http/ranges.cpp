#include "ranges.hpp"

#include <charconv>
#include <string>

#include "berth/oci/error.hpp"

namespace berth::http {
namespace {

std::optional<std::uint64_t> number(std::string_view text) {
    if (text.empty() || text.size() > 19) return std::nullopt;
    std::uint64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return value;
}

std::string_view trim(std::string_view text) {
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
    return text;
}

}  // namespace

std::optional<ByteRange> parse_range(std::string_view header, std::uint64_t size) {
    header = trim(header);
    if (!header.starts_with("bytes=")) return std::nullopt;
    auto spec = trim(header.substr(6));
    if (spec.find(',') != std::string_view::npos) return std::nullopt;  // multiple ranges: RFC 9110 lets us send all
    auto dash = spec.find('-');
    if (dash == std::string_view::npos) return std::nullopt;
    auto first_text = trim(spec.substr(0, dash)), last_text = trim(spec.substr(dash + 1));
    auto unsatisfiable = [&] {
        return oci::Error(oci::ErrorCode::range_not_satisfiable, "requested range not satisfiable",
                          "blob size " + std::to_string(size));
    };
    if (first_text.empty()) {  // suffix: the last n bytes
        auto n = number(last_text);
        if (!n) return std::nullopt;
        if (*n == 0 || size == 0) throw unsatisfiable();
        auto length = std::min(*n, size);
        return ByteRange{size - length, length};
    }
    auto first = number(first_text);
    if (!first) return std::nullopt;
    std::uint64_t last = size ? size - 1 : 0;
    if (!last_text.empty()) {
        auto parsed = number(last_text);
        if (!parsed || *parsed < *first) return std::nullopt;
        last = std::min(*parsed, last);
    }
    if (*first >= size) throw unsatisfiable();
    return ByteRange{*first, last - *first + 1};
}

std::optional<ChunkRange> parse_content_range(std::string_view header) {
    header = trim(header);
    if (header.starts_with("bytes ")) header = trim(header.substr(6));
    else if (header.starts_with("bytes=")) header = header.substr(6);
    if (auto slash = header.find('/'); slash != std::string_view::npos) header = header.substr(0, slash);
    auto dash = header.find('-');
    if (dash == std::string_view::npos) return std::nullopt;
    auto first = number(trim(header.substr(0, dash))), last = number(trim(header.substr(dash + 1)));
    if (!first || !last || *last < *first) return std::nullopt;
    return ChunkRange{*first, *last};
}

}  // namespace berth::http
