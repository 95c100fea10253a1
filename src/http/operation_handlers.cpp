// What operators ask: liveness, readiness, metrics, namespace usage, lineage and backups.
#include <nlohmann/json.hpp>

#include "berth/auth/authorizer.hpp"
#include "berth/net/host_port.hpp"
#include "berth/oci/encoding.hpp"
#include "berth/oci/error.hpp"
#include "berth/oci/names.hpp"
#include "berth/observe/metrics.hpp"
#include "berth/registry/registry.hpp"
#include "berth/replication/peer_service.hpp"
#include "berth/storage/backup.hpp"
#include "responses.hpp"

namespace berth::http {

using oci::Error;
using oci::ErrorCode;

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

UsageAnswer usage_answer(registry::Registry& registry, const auth::Authorizer* authorizer,
                         const auth::Principal& principal, std::optional<std::size_t> n, const std::string& last) {
    auto page = registry.usage(n, last);
    // The next page starts after the last namespace read, whether or not the caller may see it.
    const auto last_read = page.items.empty() ? std::string() : page.items.back().ns;
    const auto read = page.items.size();
    if (authorizer && authorizer->enabled())
        std::erase_if(page.items, [&](auto& item) {
            return !registry.any_repository(
                item.ns, [&](const std::string& repo) { return authorizer->may_pull(principal, repo); });
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
    UsageAnswer answer{{}, read, std::nullopt};
    if (page.more) answer.next = last_read;
    answer.body =
        nlohmann::json{{"namespaces", list}, {"next", answer.next ? nlohmann::json(*answer.next) : nullptr}}.dump();
    return answer;
}

// Namespace usage, a page at a time like the catalog. With authentication,
// a caller sees the namespaces holding a repository it may pull from.
Plan plan_usage(registry::Registry& registry, const auth::Authorizer* authorizer, Request& request) {
    if (request.method != Method::get && request.method != Method::head) not_allowed();
    auto answer = usage_answer(registry, authorizer, request.principal, page_size(request.target.query),
                               request.target.query.get("last").value_or(""));
    auto response = json_response(200, answer.body);
    if (answer.next) response.set("Link", next_link(std::string(usage_path), answer.read, *answer.next));
    return immediate(std::move(response));
}

// What is built on a base, a page at a time like the tag list: the base's repository must be
// pullable, and the derived images listed are those the caller may pull.
Plan plan_lineage(const registry::Registry& registry, const auth::Authorizer* authorizer, Request& request) {
    if (request.method != Method::get && request.method != Method::head) not_allowed();
    const auto& query = request.target.query;
    registry::LineageQuery ask;
    ask.repository = query.get("repository").value_or("");
    ask.reference = query.get("reference").value_or("");
    if (!oci::valid_repository_name(ask.repository))
        throw Error(ErrorCode::name_invalid, "repository= must name a repository", ask.repository);
    if (!oci::valid_tag(ask.reference) && !oci::Digest::parse(ask.reference))
        throw Error(ErrorCode::manifest_invalid, "reference= must be a tag or a digest", ask.reference);
    constexpr std::size_t default_page = 100, max_page = 1000;
    ask.limit = std::min(page_size(query).value_or(default_page), max_page);
    if (auto last = query.get("last")) {
        auto cursor = registry::parse_lineage_cursor(*last);
        if (!cursor) throw Error(ErrorCode::bad_request, "last must be REPOSITORY@DIGEST", *last);
        ask.after = *cursor;
    }
    if (authorizer && authorizer->enabled()) {
        if (!authorizer->may_pull(request.principal, ask.repository))
            throw Error(ErrorCode::denied, "pulling from the base's repository is not allowed", ask.repository);
        ask.may_pull = [&](const std::string& repo) { return authorizer->may_pull(request.principal, repo); };
    }
    auto lineage = registry.lineage(ask);
    std::string next;
    if (lineage.next) {
        next = std::string(lineage_path) + "?repository=" + net::query_escape(ask.repository) +
               "&reference=" + net::query_escape(ask.reference) + "&n=" + std::to_string(ask.limit) +
               "&last=" + net::query_escape(registry::lineage_cursor(*lineage.next));
    }
    auto response = json_response(200, registry::lineage_json(lineage, next));
    if (!next.empty()) response.set("Link", "<" + next + ">; rel=\"next\"");
    return immediate(std::move(response));
}

// Backups the server takes into its configured target: POST starts one (202; 409 while one runs),
// GET says how the last one went. Only with backup.secret_file's secret as a Bearer token.
Plan plan_backup(storage::BackupJob* backups, const Request& request) {
    if (!backups || backups->options().secret.empty())
        throw Error(ErrorCode::unsupported, "this server takes no backups on request (backup.secret_file)");
    const std::string expected = "Bearer " + backups->options().secret;
    if (!oci::equal_secrets(request.authorization, expected)) {
        auto response = error_response(ErrorCode::unauthorized, "the backup secret is required");
        response.set("WWW-Authenticate", "Bearer realm=\"berth-backup\"");
        return immediate(std::move(response));
    }
    if (request.method == Method::post) {
        if (!backups->start()) return immediate(json_response(409, backups->status_json()));
        return immediate(json_response(202, backups->status_json()));
    }
    if (request.method != Method::get && request.method != Method::head) not_allowed();
    return immediate(json_response(200, backups->status_json()));
}

}  // namespace berth::http
