#include "request_metrics.hpp"

#include <algorithm>

namespace berth::http {
namespace {

const char* route_name(std::size_t route) {
    static constexpr const char* names[] = {"base",         "catalog", "tags",      "manifest", "blob",
                                            "upload_start", "upload",  "referrers", "healthz",  "readyz",
                                            "metrics",      "token",   "peer",      "usage",    "unknown"};
    return route < std::size(names) ? names[route] : "unknown";
}

const char* method_name(std::size_t method) {
    static constexpr const char* names[] = {"GET", "HEAD", "PUT", "POST", "PATCH", "DELETE", "OTHER"};
    return method < std::size(names) ? names[method] : "OTHER";
}

}  // namespace

void RequestMetrics::record(RouteKind route, Method method, int status, double seconds, std::uint64_t bytes_in,
                            std::uint64_t bytes_out) {
    const auto r = static_cast<std::size_t>(route), m = static_cast<std::size_t>(method);
    auto s = static_cast<std::size_t>(std::find(statuses.begin(), statuses.end() - 1, status) - statuses.begin());
    counts_[r][m][s].fetch_add(1, std::memory_order_relaxed);
    auto b = static_cast<std::size_t>(std::lower_bound(buckets.begin(), buckets.end(), seconds) - buckets.begin());
    latency_[r][b].fetch_add(1, std::memory_order_relaxed);
    latency_micros_[r].fetch_add(static_cast<std::uint64_t>(seconds * 1e6), std::memory_order_relaxed);
    bytes_in_.fetch_add(bytes_in, std::memory_order_relaxed);
    bytes_out_.fetch_add(bytes_out, std::memory_order_relaxed);
}

std::string RequestMetrics::text() const {
    std::string out =
        "# HELP berth_http_requests_total Requests answered, by route, method and status.\n"
        "# TYPE berth_http_requests_total counter\n";
    for (std::size_t r = 0; r < routes; ++r)
        for (std::size_t m = 0; m < methods; ++m)
            for (std::size_t s = 0; s < statuses.size(); ++s)
                if (auto n = counts_[r][m][s].load(std::memory_order_relaxed))
                    out += "berth_http_requests_total{route=\"" + std::string(route_name(r)) + "\",method=\"" +
                           method_name(m) + "\",status=\"" + (statuses[s] ? std::to_string(statuses[s]) : "other") +
                           "\"} " + std::to_string(n) + "\n";
    out +=
        "# HELP berth_http_request_duration_seconds Time to answer, by route.\n"
        "# TYPE berth_http_request_duration_seconds histogram\n";
    for (std::size_t r = 0; r < routes; ++r) {
        std::uint64_t cumulative = 0;
        for (std::size_t b = 0; b <= buckets.size(); ++b) cumulative += latency_[r][b].load(std::memory_order_relaxed);
        if (!cumulative) continue;
        const std::string label = "route=\"" + std::string(route_name(r)) + "\"";
        std::uint64_t running = 0;
        for (std::size_t b = 0; b <= buckets.size(); ++b) {
            running += latency_[r][b].load(std::memory_order_relaxed);
            auto le = b < buckets.size() ? std::to_string(buckets[b]) : std::string("+Inf");
            out += "berth_http_request_duration_seconds_bucket{" + label + ",le=\"" + le + "\"} " +
                   std::to_string(running) + "\n";
        }
        out += "berth_http_request_duration_seconds_sum{" + label + "} " +
               std::to_string(static_cast<double>(latency_micros_[r].load()) / 1e6) + "\n";
        out += "berth_http_request_duration_seconds_count{" + label + "} " + std::to_string(cumulative) + "\n";
    }
    out +=
        "# HELP berth_http_received_bytes_total Request body bytes received.\n"
        "# TYPE berth_http_received_bytes_total counter\n"
        "berth_http_received_bytes_total " +
        std::to_string(bytes_in_.load()) +
        "\n"
        "# HELP berth_http_sent_bytes_total Response body bytes sent.\n"
        "# TYPE berth_http_sent_bytes_total counter\n"
        "berth_http_sent_bytes_total " +
        std::to_string(bytes_out_.load()) +
        "\n"
        "# HELP berth_blob_read_from_disk_bytes_total Blob bytes a GET found outside the page cache and read in on a "
        "worker thread.\n"
        "# TYPE berth_blob_read_from_disk_bytes_total counter\n"
        "berth_blob_read_from_disk_bytes_total " +
        std::to_string(blob_bytes_read_from_disk.load()) +
        "\n"
        "# HELP berth_tls_kernel_sent_bytes_total Blob bytes sent over TLS with sendfile, encrypted by the kernel "
        "(kTLS).\n"
        "# TYPE berth_tls_kernel_sent_bytes_total counter\n"
        "berth_tls_kernel_sent_bytes_total " +
        std::to_string(blob_bytes_sent_by_kernel_tls.load()) +
        "\n"
        "# HELP berth_http_connections Open client connections.\n"
        "# TYPE berth_http_connections gauge\n"
        "berth_http_connections " +
        std::to_string(connections.load()) +
        "\n"
        "# HELP berth_accept_backoffs_total Times accepting a connection failed for want of descriptors or memory and "
        "the listener paused.\n"
        "# TYPE berth_accept_backoffs_total counter\n"
        "berth_accept_backoffs_total " +
        std::to_string(accept_backoffs.load()) +
        "\n"
        "# HELP berth_remote_queue_refusals_total Requests needing an upstream or peer refused because its queue was "
        "full or its deadline passed while queued.\n"
        "# TYPE berth_remote_queue_refusals_total counter\n"
        "berth_remote_queue_refusals_total " +
        std::to_string(remote_queue_refusals.load()) + "\n";
    return out;
}

}  // namespace berth::http
