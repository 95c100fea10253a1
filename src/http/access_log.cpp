#include "access_log.hpp"

#include <nlohmann/json.hpp>

#include "berth/observe/log.hpp"

namespace berth::http {

void log_access(const AccessRecord& r) {
    nlohmann::json fields{
        {"request_id", r.request_id}, {"peer", r.peer},           {"method", r.method},
        {"target", r.target},         {"status", r.status},       {"principal", r.principal},
        {"bytes_in", r.bytes_in},     {"bytes_out", r.bytes_out}, {"duration_ms", r.seconds * 1000.0}};
    if (!r.cache.empty()) fields["cache"] = r.cache;
    if (!r.status) fields["ended"] = r.ended.empty() ? "connection closed" : r.ended;
    observe::log("info", "request", fields);
}

}  // namespace berth::http
