#pragma once
// One JSON line per request on stderr (log.access): who asked what, the answer, and its cost.
#include <cstdint>
#include <string>

namespace berth::http {

struct AccessRecord {
    std::uint64_t request_id = 0;
    std::string peer, method, target, principal;
    int status = 0;
    std::uint64_t bytes_in = 0, bytes_out = 0;
    double seconds = 0;
    std::string cache;  // how a mirrored repository's read was answered: hit, fetched or stale
    std::string ended;  // for a request left unanswered (status 0): why its connection closed
};

void log_access(const AccessRecord& record);

}  // namespace berth::http
