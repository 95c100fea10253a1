// Range and Content-Range headers. A Range that parses lies inside the blob and
// is not empty; one that cannot be satisfied throws range_not_satisfiable and
// nothing else. A Content-Range that parses has first <= last.
//
// Input: "<blob size>\n<header>"; without a newline the whole input is the
// header and the size is 1000. A size line that is not a number is hashed into
// one, so the fuzzer still reaches every size.
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "berth/oci/error.hpp"
#include "fuzz_check.hpp"
#include "http/ranges.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view input(reinterpret_cast<const char*>(data), size);
    std::uint64_t blob_size = 1000;
    std::string_view header = input;
    if (auto newline = input.find('\n'); newline != std::string_view::npos) {
        auto size_text = input.substr(0, newline);
        header = input.substr(newline + 1);
        auto [end, ec] = std::from_chars(size_text.data(), size_text.data() + size_text.size(), blob_size);
        if (ec != std::errc() || end != size_text.data() + size_text.size()) {
            blob_size = 14695981039346656037ull;  // FNV-1a
            for (unsigned char c : size_text) blob_size = (blob_size ^ c) * 1099511628211ull;
            if (!size_text.empty() && size_text[0] == 's') blob_size %= 1 << 20;  // small sizes too
        }
    }

    try {
        auto range = berth::http::parse_range(header, blob_size);
        if (range) {
            FUZZ_CHECK(range->length > 0);
            FUZZ_CHECK(range->first < blob_size);
            FUZZ_CHECK(range->length <= blob_size - range->first);  // first + length <= size, without overflow
        }
    } catch (const berth::oci::Error& error) {
        FUZZ_CHECK(error.code() == berth::oci::ErrorCode::range_not_satisfiable);
    }

    auto chunk = berth::http::parse_content_range(header);
    if (chunk) FUZZ_CHECK(chunk->first <= chunk->last);
    return 0;
}
