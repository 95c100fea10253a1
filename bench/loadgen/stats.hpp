#pragma once
// What a run measures: per-worker latencies, op and byte counts, their percentiles, and
// the failed ops by kind with the first few error messages.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "http_client.hpp"

namespace berth::bench {

using Clock = std::chrono::steady_clock;

// One worker's ops; every worker thread has its own, merged after the run.
struct WorkerResult {
    std::vector<double> latencies_us;
    std::uint64_t ops = 0, bytes = 0;
};

// Failed ops of a run by kind, shared by its workers.
struct Counters {
    std::atomic<std::uint64_t> status{0}, connection{0}, short_read{0}, verify{0};
    std::atomic<std::uint64_t> post_fallbacks{0};
    std::mutex mu;
    std::vector<std::string> samples;  // first few error messages
    void record(Failure kind, const std::string& msg);
    std::uint64_t total() const { return status + connection + short_read + verify; }
};

// Latency percentiles of a run, in milliseconds.
struct Latency {
    double p50 = 0, p90 = 0, p99 = 0, max = 0;
};

// The workers' results together.
struct Totals {
    std::uint64_t ops = 0, bytes = 0;
    Latency latency_ms;
};

// The p-th percentile (0..100) of sorted values, interpolated between neighbours.
double percentile(const std::vector<double>& sorted, double p);

// Sums the workers' ops and bytes and takes the percentiles over all their latencies.
Totals merge(const std::vector<WorkerResult>& results);

// Seconds from a to b.
inline double seconds_between(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}

}  // namespace berth::bench
