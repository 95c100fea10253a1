#pragma once
// GET /metrics, in the Prometheus text format (0.0.4), is written here and
// nowhere else. Each metric is declared once in metric_list.hpp. A part of the
// process that has metrics registers a source; on each scrape every source
// adds its current values to a MetricsWriter, which writes each family's HELP
// and TYPE once, before its samples, in the order of the list.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "berth/observe/metric_list.hpp"

namespace berth::observe {

enum class MetricType { counter, gauge, summary, histogram };

enum class Metric {
#define BERTH_METRIC_ID(id, type, help) id,
    BERTH_METRICS(BERTH_METRIC_ID)
#undef BERTH_METRIC_ID
};

struct MetricInfo {
    std::string_view name;  // with its berth_ prefix
    MetricType type;
    std::string_view help;
};
const MetricInfo& metric_info(Metric metric);

// name="value" pairs; values are escaped as the format requires.
using Labels = std::initializer_list<std::pair<std::string_view, std::string_view>>;

class MetricsWriter {
public:
    MetricsWriter();
    void add(Metric metric, double value) { add(metric, {}, value); }
    void add(Metric metric, Labels labels, double value);
    // A histogram: bucket upper bounds, cumulative counts (one more, for +Inf), and the sum.
    void add_histogram(Metric metric, Labels labels, std::span<const double> bounds,
                       std::span<const std::uint64_t> cumulative, double sum);
    void add_summary(Metric metric, Labels labels, double sum, std::uint64_t count);
    // A family with no samples yet still gets its HELP and TYPE.
    void declare(Metric metric);
    std::string text() const;

private:
    void sample(Metric metric, std::string_view suffix, const std::string& labels, double value);
    std::vector<std::string> samples_;  // by Metric
    std::vector<bool> present_;
};

class MetricsRegistry {
public:
    using Source = std::function<void(MetricsWriter&)>;
    void add_source(Source source);
    std::string text() const;

private:
    mutable std::mutex mutex_;
    std::vector<Source> sources_;
};

}  // namespace berth::observe
