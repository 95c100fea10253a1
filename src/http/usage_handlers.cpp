// /_berth/v1/usage: namespace usage against the quotas (docs/quotas.md), for users.
#include <nlohmann/json.hpp>

#include "berth/registry/registry.hpp"
#include "cursors.hpp"
#include "responses.hpp"

namespace berth::http {

UsageAnswer usage_answer(registry::Registry& registry, const std::function<bool(const std::string&)>& may_pull,
                         const Cursors& cursors, std::optional<std::size_t> n, const std::string& last) {
    constexpr std::size_t max_namespaces_read = 10000;
    const auto max_page = registry.options().max_page;
    const auto limit = std::min(n.value_or(max_page), max_page);
    // A namespace's figures count every repository it holds: shown only to a caller who may see
    // them all, so no count says that a hidden repository exists.
    auto page = read_visible<registry::NamespaceReport>(
        cursors, last, limit, max_namespaces_read,
        [&](const std::string& after, std::size_t want) { return registry.usage(want, after); },
        [](const registry::NamespaceReport& item) { return item.ns; },
        [&](const registry::NamespaceReport& item) {
            return !may_pull ||
                   !registry.any_repository(item.ns, [&](const std::string& repo) { return !may_pull(repo); });
        });
    auto list = nlohmann::json::array();
    for (auto& item : page.items) {
        auto bound = [](std::uint64_t value) { return value ? nlohmann::json(value) : nlohmann::json(nullptr); };
        list.push_back({{"namespace", item.ns},
                        {"used_bytes", item.usage.bytes},
                        {"repositories", item.usage.repositories},
                        {"max_bytes", bound(item.rule ? item.rule->max_bytes : 0)},
                        {"max_repositories", bound(item.rule ? item.rule->max_repositories : 0)}});
    }
    UsageAnswer answer{{}, limit, page.next};
    answer.body =
        nlohmann::json{{"namespaces", list}, {"next", answer.next ? nlohmann::json(*answer.next) : nullptr}}.dump();
    return answer;
}

// Namespace usage, a page at a time like the catalog, filtered like usage_answer.
Plan plan_usage(Context& context, Request& request) {
    if (request.method != Method::get && request.method != Method::head) not_allowed();
    const auto& query = request.target.query;
    auto answer = usage_answer(context.services.registry, may_list_of(context, request), context.cursors,
                               page_size(query), query.get("last").value_or(""));
    auto response = json_response(200, answer.body);
    if (answer.next)
        response.set("Link", next_link(std::string(request.target.route->pattern), answer.read, *answer.next));
    return immediate(std::move(response));
}

}  // namespace berth::http
