#include "answers.hpp"

#include <algorithm>

#include "berth/oci/json.hpp"
#include "berth/oci/names.hpp"

namespace berth::proxy::answers {
namespace {

// A tag list or manifest is an object of arrays of objects: anything deeper is refused.
constexpr std::size_t max_depth = 16;

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

}  // namespace berth::proxy::answers
