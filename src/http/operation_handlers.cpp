// What operators ask: liveness, readiness, metrics and namespace usage.
#include <nlohmann/json.hpp>

#include "berth/auth/authorizer.hpp"
#include "berth/observe/metrics.hpp"
#include "berth/registry/registry.hpp"
#include "berth/replication/peer_service.hpp"
#include "responses.hpp"

namespace berth::http {

Plan plan_healthz() { return immediate(json_response(200, R"({"status":"ok"})")); }

Plan plan_readyz(const replication::PeerService* peers) {
    if (peers && !peers->ready()) {
        auto problem = peers->incompatible_peers();
        return immediate(json_response(
            503, nlohmann::json{{"status", problem.empty() ? "catching up with peers"
                                                           : "peers speak an incompatible protocol: " + problem}}
                     .dump()));
    }
    return immediate(json_response(200, R"({"status":"ready"})"));
}

Plan plan_metrics(const observe::MetricsRegistry* metrics) {
    return immediate(json_response(200, metrics ? metrics->text() : "", "text/plain; version=0.0.4"));
}

// Namespace usage, a page at a time like the catalog. With authentication,
// a caller sees the namespaces holding a repository it may pull from.
Plan plan_usage(registry::Registry& registry, const auth::Authorizer* authorizer, Request& request) {
    if (request.method != Method::get && request.method != Method::head) not_allowed();
    auto page = registry.usage(page_size(request.target.query), request.target.query.get("last").value_or(""));
    // The next page starts after the last namespace read, whether or not the caller may see it.
    const auto read = page.items.size();
    const auto last_read = page.items.empty() ? std::string() : page.items.back().ns;
    if (authorizer && authorizer->enabled())
        std::erase_if(page.items, [&](auto& item) {
            return !registry.any_repository(
                item.ns, [&](const std::string& repo) { return authorizer->may_pull(request.principal, repo); });
        });
    auto list = nlohmann::json::array();
    for (auto& item : page.items) {
        auto limit = [](std::uint64_t value) { return value ? nlohmann::json(value) : nlohmann::json(nullptr); };
        list.push_back({{"namespace", item.ns},
                        {"used_bytes", item.usage.bytes},
                        {"repositories", item.usage.repositories},
                        {"max_bytes", limit(item.rule ? item.rule->max_bytes : 0)},
                        {"max_repositories", limit(item.rule ? item.rule->max_repositories : 0)}});
    }
    auto response = json_response(200, nlohmann::json{{"namespaces", list}}.dump());
    if (page.more) response.set("Link", next_link(std::string(usage_path), read, last_read));
    return immediate(std::move(response));
}

}  // namespace berth::http
