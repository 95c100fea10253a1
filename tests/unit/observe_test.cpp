#include <catch2/catch.hpp>

#include "berth/observe/metrics.hpp"

using namespace berth::observe;

TEST_CASE("each metric family is written once, with its HELP and TYPE before its samples") {
    MetricsRegistry registry;
    registry.add_source([](MetricsWriter& out) {
        out.add(Metric::proxy_hits_total, {{"upstream", "a"}}, 3);
        out.add(Metric::http_connections, 2);
    });
    registry.add_source([](MetricsWriter& out) { out.add(Metric::proxy_hits_total, {{"upstream", "b"}}, 4); });
    auto text = registry.text();
    CHECK(text ==
          "# HELP berth_http_connections Open client connections.\n"
          "# TYPE berth_http_connections gauge\n"
          "berth_http_connections 2\n"
          "# HELP berth_proxy_hits_total Reads of mirrored repositories answered from the cache.\n"
          "# TYPE berth_proxy_hits_total counter\n"
          "berth_proxy_hits_total{upstream=\"a\"} 3\n"
          "berth_proxy_hits_total{upstream=\"b\"} 4\n");
}

TEST_CASE("label values are escaped and numbers written exactly") {
    MetricsWriter out;
    out.add(Metric::replication_peer_up, {{"peer", "a\"b\\c\nd"}}, 1);
    out.add(Metric::retention_last_run_seconds, 0.25);
    const double bounds[] = {0.0005, 1};
    const std::uint64_t cumulative[] = {1, 2, 5};
    out.add_histogram(Metric::http_request_duration_seconds, {{"route", "blob"}}, bounds, cumulative, 7.5);
    out.add_summary(Metric::proxy_upstream_seconds, {{"upstream", "x"}}, 1.5, 3);
    out.declare(Metric::gc_runs_total);
    auto text = out.text();
    CHECK(text.find("berth_replication_peer_up{peer=\"a\\\"b\\\\c\\nd\"} 1\n") != std::string::npos);
    CHECK(text.find("berth_retention_last_run_seconds 0.25\n") != std::string::npos);
    CHECK(text.find("berth_http_request_duration_seconds_bucket{route=\"blob\",le=\"0.0005\"} 1\n") !=
          std::string::npos);
    CHECK(text.find("berth_http_request_duration_seconds_bucket{route=\"blob\",le=\"+Inf\"} 5\n") != std::string::npos);
    CHECK(text.find("berth_http_request_duration_seconds_count{route=\"blob\"} 5\n") != std::string::npos);
    CHECK(text.find("berth_proxy_upstream_seconds_sum{upstream=\"x\"} 1.5\n") != std::string::npos);
    CHECK(text.find("# TYPE berth_proxy_upstream_seconds summary\n") != std::string::npos);
    CHECK(text.find("# TYPE berth_gc_runs_total counter\n") != std::string::npos);
}
