#pragma once
// What the server counts of each request on a connection (session.cpp): in flight, its metrics
// (request_metrics.hpp) and its access log line (access_log.hpp).
#include <chrono>
#include <cstdint>
#include <string>

#include "access_log.hpp"
#include "context.hpp"
#include "message.hpp"

namespace berth::http {

class RequestRecord {
public:
    explicit RequestRecord(ServerContext& context) : context_(context) {}

    void begin() {
        if (!open_) ++context_.in_flight;
        open_ = true;
        started_ = std::chrono::steady_clock::now();
        id_ = context_.next_request_id++;
        body_bytes = bytes_out = 0;
        status = 0;
        ended.clear();
    }

    // Counted once: later calls do nothing until the next begin.
    void end(const Request& request) {
        if (!open_) return;
        open_ = false;
        --context_.in_flight;
        const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
        context_.request_metrics.record(request.target.route ? *request.target.route : unknown_route(), request.method,
                                        status, seconds, body_bytes, bytes_out);
        if (context_.options.access_log)
            log_access(
                {id_, peer, method, target, principal, status, body_bytes, bytes_out, seconds, request.cache, ended});
    }

    bool open() const { return open_; }

    std::string peer, method, target, principal;
    std::uint64_t body_bytes = 0, bytes_out = 0;
    int status = 0;
    std::string ended;  // why a request that got no answer ended, for its log line

private:
    ServerContext& context_;
    bool open_ = false;
    std::chrono::steady_clock::time_point started_;
    std::uint64_t id_ = 0;
};

}  // namespace berth::http
