#include "answers.hpp"

#include <algorithm>

#include "berth/oci/json.hpp"
#include "berth/oci/names.hpp"

namespace berth::proxy::answers {
namespace {

// A tag list or manifest is an object of arrays of objects: anything deeper is refused.
constexpr std::size_t max_depth = 16;
// Tokens are opaque text; longer ones are refused rather than sent back.
constexpr std::size_t max_token_chars = 16 << 10;

}  // namespace

std::optional<TagList> parse_tag_list(std::string_view body, bool has_link, std::string_view last, std::size_t limit) {
    TagList list;
    bool over = false;
    const bool parsed = oci::for_each_string_in(body, "tags", max_depth, [&](std::string&& tag) {
        // Tags come in lexical order (distribution-spec); one at or before `last` is a repeat.
        if (!oci::valid_tag(tag) || (!last.empty() && tag <= last)) return true;
        if (list.tags.size() == limit) {
            over = true;
            return false;  // enough: the rest is the next page's
        }
        list.tags.push_back(std::move(tag));
        return true;
    });
    if (!parsed && !over) return std::nullopt;
    std::sort(list.tags.begin(), list.tags.end());
    list.tags.erase(std::unique(list.tags.begin(), list.tags.end()), list.tags.end());
    list.more = (has_link || over) && !list.tags.empty();
    return list;
}

std::string media_type_of(std::string_view content_type, std::string_view body) {
    auto type = std::string(content_type.substr(0, content_type.find(';')));
    while (!type.empty() && type.back() == ' ') type.pop_back();
    if (!type.empty() && type != "application/json" && type != "text/plain") return type;
    auto doc = oci::parse_json(body, {.max_depth = max_depth});
    if (doc.is_object())
        if (auto it = doc.find("mediaType"); it != doc.end() && it->is_string()) return it->get<std::string>();
    return type;
}

std::optional<Token> parse_token(std::string_view body) {
    if (body.size() > max_token_bytes) return std::nullopt;
    auto doc = oci::parse_json(body, {.max_depth = max_depth});
    if (!doc.is_object()) return std::nullopt;
    std::string value;
    for (const char* key : {"token", "access_token"})
        if (auto it = doc.find(key); it != doc.end() && it->is_string() && !it->get_ref<const std::string&>().empty()) {
            value = it->get<std::string>();
            break;
        }
    if (value.empty() || value.size() > max_token_chars) return std::nullopt;
    // Printable ASCII only: the token goes back out in a header.
    if (std::any_of(value.begin(), value.end(), [](char c) { return c < 0x21 || c > 0x7e; })) return std::nullopt;
    std::int64_t expires_in = 60;
    if (auto it = doc.find("expires_in"); it != doc.end() && it->is_number_integer())
        expires_in = it->get<std::int64_t>();
    return Token{std::move(value), std::chrono::seconds(std::clamp<std::int64_t>(expires_in, 20, 3600) - 10)};
}

}  // namespace berth::proxy::answers
