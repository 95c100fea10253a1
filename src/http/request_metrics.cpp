#include "request_metrics.hpp"

#include <algorithm>

namespace berth::http {
namespace {

// The row whose slot a route's requests count in: the first with its label.
std::size_t slot_of(const Route& route) {
    static const auto slots = [] {
        std::array<std::size_t, max_routes> out{};
        const auto table = routes();
        for (std::size_t r = 0; r < table.size(); ++r) {
            out[r] = r;
            for (std::size_t first = 0; first < r; ++first)
                if (table[first].label == table[r].label) {
                    out[r] = first;
                    break;
                }
        }
        return out;
    }();
    return slots[route_index(route)];
}

}  // namespace

void RequestMetrics::record(const Route& route, Method method, int status, double seconds, std::uint64_t bytes_in,
                            std::uint64_t bytes_out) {
    const auto r = slot_of(route), m = static_cast<std::size_t>(method);
    auto s = static_cast<std::size_t>(std::find(statuses.begin(), statuses.end() - 1, status) - statuses.begin());
    counts_[r][m][s].fetch_add(1, std::memory_order_relaxed);
    auto b = static_cast<std::size_t>(std::lower_bound(buckets.begin(), buckets.end(), seconds) - buckets.begin());
    latency_[r][b].fetch_add(1, std::memory_order_relaxed);
    latency_micros_[r].fetch_add(static_cast<std::uint64_t>(seconds * 1e6), std::memory_order_relaxed);
    bytes_in_.fetch_add(bytes_in, std::memory_order_relaxed);
    bytes_out_.fetch_add(bytes_out, std::memory_order_relaxed);
}

void RequestMetrics::write(observe::MetricsWriter& out) const {
    using observe::Metric;
    out.declare(Metric::http_requests_total);
    out.declare(Metric::http_request_duration_seconds);
    const auto table = routes();
    for (std::size_t r = 0; r < table.size(); ++r) {
        const auto route = std::string(table[r].label);
        for (std::size_t m = 0; m < methods; ++m)
            for (std::size_t s = 0; s < statuses.size(); ++s)
                if (auto n = counts_[r][m][s].load(std::memory_order_relaxed)) {
                    const auto status = statuses[s] ? std::to_string(statuses[s]) : std::string("other");
                    out.add(Metric::http_requests_total,
                            {{"route", route}, {"method", method_name(static_cast<Method>(m))}, {"status", status}},
                            static_cast<double>(n));
                }
        std::array<std::uint64_t, buckets.size() + 1> cumulative{};
        std::uint64_t running = 0;
        for (std::size_t b = 0; b <= buckets.size(); ++b)
            cumulative[b] = running += latency_[r][b].load(std::memory_order_relaxed);
        if (running)
            out.add_histogram(Metric::http_request_duration_seconds, {{"route", route}}, buckets, cumulative,
                              static_cast<double>(latency_micros_[r].load()) / 1e6);
    }
    out.add(Metric::http_received_bytes_total, static_cast<double>(bytes_in_.load()));
    out.add(Metric::http_sent_bytes_total, static_cast<double>(bytes_out_.load()));
    out.add(Metric::blob_read_from_disk_bytes_total, static_cast<double>(blob_bytes_read_from_disk.load()));
    out.add(Metric::tls_kernel_sent_bytes_total, static_cast<double>(blob_bytes_sent_by_kernel_tls.load()));
    if (const auto kernel = tls_kernel_connections.load())
        out.add(Metric::tls_connections_total, {{"encryption", "kernel"}}, static_cast<double>(kernel));
    if (const auto berth = tls_berth_connections.load())
        out.add(Metric::tls_connections_total, {{"encryption", "berth"}}, static_cast<double>(berth));
    if (const auto openssl = tls_openssl_connections.load())
        out.add(Metric::tls_connections_total, {{"encryption", "openssl"}}, static_cast<double>(openssl));
    out.add(Metric::http_connections, static_cast<double>(connections.load()));
    out.add(Metric::accept_backoffs_total, static_cast<double>(accept_backoffs.load()));
    out.add(Metric::remote_queue_refusals_total, static_cast<double>(remote_queue_refusals.load()));
}

}  // namespace berth::http
