// /v2/_catalog, a page at a time, filtered to what the caller may pull.
#include <nlohmann/json.hpp>
#include "berth/auth/authorizer.hpp"
#include "berth/oci/paths.hpp"
#include "berth/registry/registry.hpp"
#include "cursors.hpp"
#include "responses.hpp"

namespace berth::http {

using oci::Error;
using oci::ErrorCode;
using registry::Registry;

Plan plan_catalog(Registry& registry, const auth::Authorizer* authorizer, const Cursors& cursors, Request& request) {
    if (request.method != Method::get && request.method != Method::head) not_allowed();
    auto n = page_size(request.target.query);
    auto page = registry.catalog(n, cursors.open(request.target.query.get("last").value_or("")));
    // The next page starts after the last name read; sealed when the caller may not see it.
    const auto read = page.items.size();
    const auto last_read = page.items.empty() ? std::string() : page.items.back();
    if (authorizer)  // only what the caller may pull; a page may come out shorter than n, even empty
        std::erase_if(page.items, [&](auto& repo) { return !authorizer->may_pull(request.principal, repo); });
    auto response = json_response(200, nlohmann::json{{"repositories", page.items}}.dump());
    const bool visible = !page.items.empty() && page.items.back() == last_read;
    if (page.more) response.set("Link", next_link(oci::path::catalog(), read, cursors.next(last_read, visible)));
    return immediate(std::move(response));
}

}  // namespace berth::http
