// What operators ask: liveness, readiness, metrics and backups.
#include <nlohmann/json.hpp>

#include "berth/oci/error.hpp"
#include "berth/observe/metrics.hpp"
#include "berth/replication/peer_service.hpp"
#include "berth/storage/backup.hpp"
#include "responses.hpp"

namespace berth::http {

using oci::Error;
using oci::ErrorCode;

Plan plan_healthz(Context&, Request&) { return immediate(json_response(200, R"({"status":"ok"})")); }

Plan plan_readyz(Context& context, Request&) {
    const auto* peers = context.services.peers;
    if (peers && !peers->ready()) {
        auto problem = peers->incompatible_peers();
        return immediate(json_response(
            503, nlohmann::json{{"status", problem.empty() ? "catching up with peers"
                                                           : "peers speak an incompatible protocol: " + problem}}
                     .dump()));
    }
    return immediate(json_response(200, R"({"status":"ready"})"));
}

Plan plan_metrics(Context& context, Request&) {
    const auto* metrics = context.services.metrics;
    return immediate(json_response(200, metrics ? metrics->text() : "", "text/plain; version=0.0.4"));
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
// GET says how the last one went. Its caller presented the backup secret (Auth::backup).
Plan plan_backup(Context& context, Request& request) {
    auto& backups = *context.services.operations.backups;
    if (request.method == Method::post) {
        const bool started = backups.start();
        return immediate(json_response(started ? 202 : 409, backup_json(backups.status())));
    }
    if (request.method != Method::get && request.method != Method::head) not_allowed();
    return immediate(json_response(200, backup_json(backups.status())));
}

}  // namespace berth::http
