#pragma once
// What an upstream answers, read as untrusted input: every function here
// takes bytes and headers exactly as they arrived and bounds what it builds.
// The fuzzer (tests/fuzz/fuzz_upstream_answers.cpp) drives these.
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace berth::proxy::answers {

// The largest tag list read from an upstream.
constexpr std::size_t max_list_bytes = 4 << 20;

struct TagList {
    std::vector<std::string> tags;
    bool more = false;
};

// One page of an upstream's tags asked for with n=limit and last: only valid
// tag names after `last`, at most `limit`. `more` only when the page moved
// past `last` and the upstream sent a Link (or more than asked): an upstream
// that ignores `last` cannot make a client page forever. nullopt when the body
// is not a tag list.
std::optional<TagList> parse_tag_list(std::string_view body, bool has_link, std::string_view last, std::size_t limit);

// The manifest's media type: the Content-Type without parameters, or, when
// that says only JSON, the mediaType the manifest names.
std::string media_type_of(std::string_view content_type, std::string_view body);

}  // namespace berth::proxy::answers
