#pragma once
// The byte ranges of blob reads and upload chunks (ranges.cpp).
#include <cstdint>
#include <optional>
#include <string_view>

namespace berth::http {

// Range: a single "bytes=a-b", "bytes=a-" or "bytes=-n". nullopt means serve the
// whole blob (no header, or one we may ignore); an unsatisfiable range throws.
struct ByteRange {
    std::uint64_t first;
    std::uint64_t length;
};
std::optional<ByteRange> parse_range(std::string_view header, std::uint64_t size);

// Content-Range of an upload chunk: "a-b" (as Docker sends it) or "bytes a-b/*".
struct ChunkRange {
    std::uint64_t first;
    std::uint64_t last;
};
std::optional<ChunkRange> parse_content_range(std::string_view header);

}  // namespace berth::http
