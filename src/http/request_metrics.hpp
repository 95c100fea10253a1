#pragma once
// Counters and latency histograms of the requests served, by route, method
// and status, kept in fixed arrays of atomics so recording never locks.
#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "berth/observe/metrics.hpp"
#include "message.hpp"
#include "routes.hpp"

namespace berth::http {

class RequestMetrics {
public:
    void record(const Route& route, Method method, int status, double seconds, std::uint64_t bytes_in,
                std::uint64_t bytes_out);
    void write(observe::MetricsWriter& out) const;
    std::atomic<std::int64_t> connections{0};
    // Blob bytes a GET found outside the page cache and had a worker read in.
    std::atomic<std::uint64_t> blob_bytes_read_from_disk{0};
    // Blob bytes sent over TLS with sendfile(2), encrypted by the kernel (kTLS).
    std::atomic<std::uint64_t> blob_bytes_sent_by_kernel_tls{0};
    // TLS connections whose handshake completed, by who encrypts what is sent: the kernel (kTLS), berth or OpenSSL.
    std::atomic<std::uint64_t> tls_kernel_connections{0}, tls_berth_connections{0}, tls_openssl_connections{0};
    // Times accept(2) failed for want of descriptors (or memory) and the listener paused.
    std::atomic<std::uint64_t> accept_backoffs{0};
    // Requests that needed an upstream or peer and were refused because that party's queue was full,
    // or waited in it past the deadline.
    std::atomic<std::uint64_t> remote_queue_refusals{0};

private:
    // A slot per route row; rows that share a label (the web UI's) count in the first one's.
    static constexpr std::size_t methods = static_cast<std::size_t>(Method::other) + 1;
    static constexpr std::array<int, 20> statuses = {200, 201, 202, 204, 206, 400, 401, 403, 404, 405,
                                                     413, 416, 429, 431, 500, 502, 503, 504, 507, 0};
    static constexpr std::array<double, 14> buckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                       0.1,    0.25,  0.5,    1,     2.5,  5,     10};
    std::array<std::array<std::array<std::atomic<std::uint64_t>, statuses.size()>, methods>, max_routes> counts_{};
    std::array<std::array<std::atomic<std::uint64_t>, buckets.size() + 1>, max_routes> latency_{};
    std::array<std::atomic<std::uint64_t>, max_routes> latency_micros_{};
    std::atomic<std::uint64_t> bytes_in_{0}, bytes_out_{0};
};

}  // namespace berth::http
