#include "berth/observe/metrics.hpp"

#include <array>
#include <cmath>
#include <charconv>
#include <cstdint>

namespace berth::observe {
namespace {

constexpr std::array infos = {
#define BERTH_METRIC_INFO(id, type, help) MetricInfo{"berth_" #id, MetricType::type, help},
    BERTH_METRICS(BERTH_METRIC_INFO)
#undef BERTH_METRIC_INFO
};

std::string_view type_name(MetricType type) {
    switch (type) {
        case MetricType::counter: return "counter";
        case MetricType::gauge: return "gauge";
        case MetricType::summary: return "summary";
        case MetricType::histogram: return "histogram";
    }
    return "untyped";
}

std::string number(double value) {
    if (std::isnan(value)) return "NaN";
    if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
    char out[64];
    // integers as integers, anything else in the shortest form that reads back the same
    auto end = value == std::floor(value) && std::fabs(value) < 9.007199254740992e15
                   ? std::to_chars(out, out + sizeof out, static_cast<std::int64_t>(value)).ptr
               : std::fabs(value) >= 1e-6 && std::fabs(value) < 1e15
                   ? std::to_chars(out, out + sizeof out, value, std::chars_format::fixed).ptr  // 0.0005, not 5e-04
                   : std::to_chars(out, out + sizeof out, value).ptr;
    return std::string(out, end);
}

std::string escaped(std::string_view value) {
    std::string out;
    for (char c : value) {
        if (c == '\\' || c == '"') out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out;
}

std::string label_text(Labels labels, std::string_view extra_name = {}, std::string_view extra_value = {}) {
    std::string out;
    auto add = [&](std::string_view name, std::string_view value) {
        out += out.empty() ? "{" : ",";
        out += std::string(name) + "=\"" + escaped(value) + "\"";
    };
    for (auto& [name, value] : labels) add(name, value);
    if (!extra_name.empty()) add(extra_name, extra_value);
    return out.empty() ? out : out + "}";
}

}  // namespace

const MetricInfo& metric_info(Metric metric) { return infos[static_cast<std::size_t>(metric)]; }

MetricsWriter::MetricsWriter() : samples_(infos.size()), present_(infos.size(), false) {}

void MetricsWriter::declare(Metric metric) { present_[static_cast<std::size_t>(metric)] = true; }

void MetricsWriter::sample(Metric metric, std::string_view suffix, const std::string& labels, double value) {
    declare(metric);
    auto& out = samples_[static_cast<std::size_t>(metric)];
    out += std::string(metric_info(metric).name) + std::string(suffix) + labels + " " + number(value) + "\n";
}

void MetricsWriter::add(Metric metric, Labels labels, double value) { sample(metric, "", label_text(labels), value); }

void MetricsWriter::add_histogram(Metric metric, Labels labels, std::span<const double> bounds,
                                  std::span<const std::uint64_t> cumulative, double sum) {
    for (std::size_t i = 0; i < cumulative.size(); ++i)
        sample(metric, "_bucket", label_text(labels, "le", i < bounds.size() ? number(bounds[i]) : "+Inf"),
               static_cast<double>(cumulative[i]));
    sample(metric, "_sum", label_text(labels), sum);
    sample(metric, "_count", label_text(labels), cumulative.empty() ? 0 : static_cast<double>(cumulative.back()));
}

void MetricsWriter::add_summary(Metric metric, Labels labels, double sum, std::uint64_t count) {
    sample(metric, "_sum", label_text(labels), sum);
    sample(metric, "_count", label_text(labels), static_cast<double>(count));
}

std::string MetricsWriter::text() const {
    std::string out;
    for (std::size_t i = 0; i < infos.size(); ++i) {
        if (!present_[i]) continue;
        auto& info = infos[i];
        out += "# HELP " + std::string(info.name) + " " + std::string(info.help) + "\n";
        out += "# TYPE " + std::string(info.name) + " " + std::string(type_name(info.type)) + "\n";
        out += samples_[i];
    }
    return out;
}

void MetricsRegistry::add_source(Source source) {
    std::lock_guard lock(mutex_);
    sources_.push_back(std::move(source));
}

std::string MetricsRegistry::text() const {
    MetricsWriter writer;
    std::lock_guard lock(mutex_);
    for (auto& source : sources_) source(writer);
    return writer.text();
}

}  // namespace berth::observe
