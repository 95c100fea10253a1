// Error counting and latency percentiles.
#include "stats.hpp"

#include <algorithm>
#include <cmath>

namespace berth::bench {

void Counters::record(Failure kind, const std::string& msg) {
    switch (kind) {
        case Failure::status: ++status; break;
        case Failure::connection: ++connection; break;
        case Failure::short_read: ++short_read; break;
        case Failure::verify: ++verify; break;
        case Failure::none: break;
    }
    std::lock_guard lock(mu);
    if (samples.size() < 5) samples.push_back(msg);
}

double percentile(const std::vector<double>& sorted, double p) {
    if (sorted.empty()) return 0;
    double idx = p / 100.0 * (sorted.size() - 1);
    auto lo = static_cast<std::size_t>(std::floor(idx));
    auto hi = static_cast<std::size_t>(std::ceil(idx));
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (idx - lo);
}

Totals merge(const std::vector<WorkerResult>& results) {
    std::vector<double> lat;
    Totals t;
    for (auto& r : results) {
        lat.insert(lat.end(), r.latencies_us.begin(), r.latencies_us.end());
        t.ops += r.ops;
        t.bytes += r.bytes;
    }
    std::sort(lat.begin(), lat.end());
    t.latency_ms.p50 = percentile(lat, 50) / 1000;
    t.latency_ms.p90 = percentile(lat, 90) / 1000;
    t.latency_ms.p99 = percentile(lat, 99) / 1000;
    t.latency_ms.max = lat.empty() ? 0 : lat.back() / 1000;
    return t;
}

}  // namespace berth::bench
