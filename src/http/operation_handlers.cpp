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
#include "cursors.hpp"
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

UsageAnswer usage_answer(registry::Registry& registry, const std::function<bool(const std::string&)>& may_pull,
                         const Cursors& cursors, std::optional<std::size_t> n, const std::string& last) {
    constexpr std::size_t max_namespaces_read = 10000;
    const auto max_page = registry.options().max_page;
    const auto limit = std::min(n.value_or(max_page), max_page);
    // A namespace's figures count every repository it holds: shown only to a caller who may see
    // them all, so no count says that a hidden repository exists.
    auto page = read_visible<registry::NamespaceReport>(
        cursors, cursors.open(last), limit, max_namespaces_read,
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

// Namespace usage, a page at a time like the catalog. With authentication,
// a caller sees the namespaces holding a repository it may pull from.
Plan plan_usage(registry::Registry& registry, const auth::Authorizer* authorizer, const Cursors& cursors,
                Request& request) {
    if (request.method != Method::get && request.method != Method::head) not_allowed();
    std::function<bool(const std::string&)> may_pull;
    if (authorizer && authorizer->enabled())
        may_pull = [authorizer, &request](const std::string& repo) {
            return authorizer->may_pull(request.principal, repo);
        };
    auto answer = usage_answer(registry, may_pull, cursors, page_size(request.target.query),
                               request.target.query.get("last").value_or(""));
    auto response = json_response(200, answer.body);
    if (answer.next) response.set("Link", next_link(std::string(usage_path), answer.read, *answer.next));
    return immediate(std::move(response));
}

// What is built on a base, a page at a time like the tag list: the base's repository must be
// pullable, and the derived images listed are those the caller may pull.
Plan plan_lineage(const registry::Registry& registry, const auth::Authorizer* authorizer, const Cursors& cursors,
                  Request& request) {
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
        auto cursor = registry::parse_lineage_cursor(cursors.open(*last));
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
               "&reference=" + net::query_escape(ask.reference) + "&n=" + std::to_string(ask.limit) + "&last=" +
               net::query_escape(cursors.next(registry::lineage_cursor(*lineage.next),
                                              !ask.may_pull || ask.may_pull(lineage.next->repo)));
    }
    auto response = json_response(200, registry::lineage_json(lineage, next));
    if (!next.empty()) response.set("Link", "<" + next + ">; rel=\"next\"");
    return immediate(std::move(response));
}

// {"state": "idle|running|succeeded|failed", "id", "stage", "blobs", "bytes", "copied",
//  "copied_bytes", "damaged", "started", "finished", "error", "last_success"} (times: Unix seconds).
std::string backup_json(const storage::BackupStatus& s) {
    auto zero_null = [](std::uint64_t value) { return value ? nlohmann::json(value) : nlohmann::json(nullptr); };
    auto empty_null = [](const std::string& text) {
        return text.empty() ? nlohmann::json(nullptr) : nlohmann::json(text);
    };
    return nlohmann::json{{"state", s.state},
                          {"id", empty_null(s.id)},
                          {"stage", s.stage},
                          {"blobs", s.blobs},
                          {"bytes", s.bytes},
                          {"copied", s.copied},
                          {"copied_bytes", s.copied_bytes},
                          {"damaged", s.damaged},
                          {"started", zero_null(s.started)},
                          {"finished", zero_null(s.finished)},
                          {"error", empty_null(s.error)},
                          {"last_success", zero_null(s.last_success)}}
        .dump();
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
        const bool started = backups->start();
        return immediate(json_response(started ? 202 : 409, backup_json(backups->status())));
    }
    if (request.method != Method::get && request.method != Method::head) not_allowed();
    return immediate(json_response(200, backup_json(backups->status())));
}

}  // namespace berth::http
