// /v2/<name>/tags/list, a page at a time.
#include "berth/oci/encoding.hpp"
#include "berth/oci/paths.hpp"
#include "berth/registry/registry.hpp"
#include "responses.hpp"

namespace berth::http {

using oci::Error;
using oci::ErrorCode;
using registry::Registry;

namespace {

// Names and tags are plain ASCII by the spec's grammar, but escape anyway: a
// listing is rendered on every request and nlohmann's DOM costs more than the rest.
void append_json_string(std::string& out, std::string_view text) {
    out += '"';
    for (char c : text) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            out += "\\u00" + oci::hex(std::string_view(&c, 1));
        } else {
            out += c;
        }
    }
    out += '"';
}

std::string tags_json(const std::string& name, const std::vector<std::string>& tags) {
    std::string out;
    out.reserve(32 + name.size() + tags.size() * 16);
    out += R"({"name":)";
    append_json_string(out, name);
    out += R"(,"tags":[)";
    for (std::size_t i = 0; i < tags.size(); ++i) {
        if (i) out += ',';
        append_json_string(out, tags[i]);
    }
    out += "]}";
    return out;
}

}  // namespace

Plan plan_tags(Context& context, Request& request) {
    auto& registry = context.services.registry;
    if (request.method != Method::get && request.method != Method::head) not_allowed();
    const auto& name = request.target.name;
    auto n = page_size(request.target.query);
    auto last = request.target.query.get("last").value_or("");
    auto page = registry.list_tags(name, n, last);
    auto response = json_response(200, tags_json(name, page.items));
    // A page that may be empty (an upstream's) never links on from nothing.
    if (page.more && !page.items.empty())
        response.set("Link", next_link(oci::path::tags(name), page.items.size(), page.items.back()));
    return immediate(std::move(response));
}

}  // namespace berth::http
