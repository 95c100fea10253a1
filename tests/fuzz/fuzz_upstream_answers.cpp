// What an upstream registry answers, read as berth reads it: tag lists (with
// and without a Link, after a `last`), manifest media types, token answers,
// WWW-Authenticate challenges, and the bounded JSON parse under all of them.
// None may throw or crash, and each keeps its promises: a tag page holds only
// valid tags after `last`, at most n, sorted, and says "more" only when it
// has tags; a token is printable with a sane lifetime; a parsed document
// stays within its cost bound.
//
// Input: the first byte picks the parser; for tag lists the second is n and
// the third says whether a Link came, then "last\n" and the body.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "berth/oci/json.hpp"
#include "berth/oci/names.hpp"
#include "fuzz_check.hpp"
#include "proxy/answers.hpp"
#include "berth/remote/challenge.hpp"
#include "berth/remote/token.hpp"

namespace {

using namespace berth;

void tag_list(std::string_view input) {
    if (input.size() < 2) return;
    const std::size_t limit = static_cast<unsigned char>(input[0]);
    const bool link = input[1] & 1;
    input.remove_prefix(2);
    const auto newline = input.find('\n');
    const auto last = input.substr(0, newline == std::string_view::npos ? 0 : newline);
    const auto body = newline == std::string_view::npos ? input : input.substr(newline + 1);
    auto list = proxy::answers::parse_tag_list(body, link, last, limit);
    if (!list) return;
    FUZZ_CHECK(list->tags.size() <= limit);
    FUZZ_CHECK(std::is_sorted(list->tags.begin(), list->tags.end()));
    FUZZ_CHECK(std::adjacent_find(list->tags.begin(), list->tags.end()) == list->tags.end());
    for (auto& tag : list->tags) {
        FUZZ_CHECK(oci::valid_tag(tag));
        FUZZ_CHECK(last.empty() || tag > last);
    }
    FUZZ_CHECK(!list->more || !list->tags.empty());
}

void token(std::string_view body) {
    auto token = remote::parse_token(body);
    if (!token) return;
    FUZZ_CHECK(!token->value.empty());
    FUZZ_CHECK(std::all_of(token->value.begin(), token->value.end(), [](char c) { return c > 0x20 && c < 0x7f; }));
    FUZZ_CHECK(token->lifetime.count() >= 10 && token->lifetime.count() <= 3590);
}

void bounded_json(std::string_view text) {
    const oci::JsonLimits limits;
    auto doc = oci::parse_json(text, limits);
    if (doc.is_discarded()) return;
    const auto cost = oci::json_cost(text, limits.max_depth);
    FUZZ_CHECK(cost <= std::max(limits.cost_floor, text.size() * limits.max_cost_per_byte));
    // What was accepted renders and reads back the same.
    const auto text_again = doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    FUZZ_CHECK(!oci::parse_json(text_again, {.max_depth = limits.max_depth, .max_cost_per_byte = 1000}).is_discarded());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
    switch (data[0] % 5) {
        case 0: tag_list(input); break;
        case 1: {
            const auto newline = input.find('\n');
            const auto type = newline == std::string_view::npos ? std::string_view{} : input.substr(0, newline);
            const auto body = newline == std::string_view::npos ? input : input.substr(newline + 1);
            proxy::answers::media_type_of(type, body);
            break;
        }
        case 2: token(input); break;
        case 3: {
            auto challenge = remote::parse_challenge(input);
            FUZZ_CHECK(std::none_of(challenge.scheme.begin(), challenge.scheme.end(),
                                    [](char c) { return c >= 'A' && c <= 'Z'; }));
            break;
        }
        case 4: bounded_json(input); break;
    }
    return 0;
}
