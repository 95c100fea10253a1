#pragma once
// JSON from outside the process (pushed manifests, upstream and peer answers,
// token answers, the configuration) is parsed here and nowhere else. A first
// pass builds nothing: it checks nesting depth and estimates what the
// document will cost in memory, so a hostile input is refused before it can
// cost more than a small multiple of its size: at most max_cost_per_byte (10)
// times its bytes, or 64 KiB for small inputs, as nlohmann and malloc count
// (src/oci/json.cpp has the weights). 4 MB of '[' is refused at depth 65.
#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <string_view>

namespace berth::oci {

struct JsonLimits {
    std::size_t max_depth = 64;
    // The document may cost at most this many times its bytes, plus a floor
    // for small inputs. Real manifests cost 3–6 times their bytes.
    std::size_t max_cost_per_byte = 10;
    std::size_t cost_floor = 64 * 1024;
};

// The document, or a discarded value (is_discarded()) when the text is not
// JSON or passes a limit. Never throws for bad input.
nlohmann::json parse_json(std::string_view text, const JsonLimits& limits = {});

// The same for answers that must be JSON: throws std::invalid_argument naming
// `what` when the text is not JSON or passes a limit.
nlohmann::json parse_json_or_throw(std::string_view text, const char* what, const JsonLimits& limits = {});

// What parse_json would build, in bytes (an upper estimate of nlohmann's
// allocations); nullopt-like 0 when the text is not JSON or deeper than
// max_depth. For tests and the fuzzer.
std::size_t json_cost(std::string_view text, std::size_t max_depth);

// Streams the strings of the array at top-level key `key` of an object (a tag
// list's "tags") to `each` without building a document; other members are
// skipped. False when the text is not a JSON object, is deeper than
// max_depth, or `each` returned false.
bool for_each_string_in(std::string_view text, std::string_view key, std::size_t max_depth,
                        const std::function<bool(std::string&&)>& each);

}  // namespace berth::oci
