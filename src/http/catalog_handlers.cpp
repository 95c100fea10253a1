// /v2/ and /v2/_catalog (a page at a time, filtered to what the caller may pull); what no route answers.
#include <nlohmann/json.hpp>
#include "berth/oci/paths.hpp"
#include "berth/registry/registry.hpp"
#include "cursors.hpp"
#include "responses.hpp"

namespace berth::http {

using oci::Error;
using oci::ErrorCode;
using registry::Registry;

// A request reads at most this many names, however few the caller may see.
constexpr std::size_t max_names_read = 10000;

Plan plan_base(Context&, Request& request) {
    if (request.method != Method::get && request.method != Method::head) not_allowed();
    return immediate(json_response(200, "{}"));
}

Plan plan_unknown(Context&, Request&) { throw Error(ErrorCode::name_unknown, "no such route"); }

Plan plan_catalog(Context& context, Request& request) {
    if (request.method != Method::get && request.method != Method::head) not_allowed();
    auto& registry = context.services.registry;
    const auto& cursors = context.cursors;
    const auto may_list = may_list_of(context, request);
    const auto max_page = registry.options().max_page;
    const auto n = std::min(page_size(request.target.query).value_or(max_page), max_page);
    auto page = read_visible<std::string>(
        cursors, request.target.query.get("last").value_or(""), n, max_names_read,
        [&](const std::string& after, std::size_t limit) { return registry.catalog(limit, after); },
        [](const std::string& name) { return name; },
        [&](const std::string& name) { return !may_list || may_list(name); });
    auto response = json_response(200, nlohmann::json{{"repositories", page.items}}.dump());
    if (page.next) response.set("Link", next_link(oci::path::catalog(), n, *page.next));
    return immediate(std::move(response));
}

}  // namespace berth::http
