// The result of a run: its summary for people and its JSON line for the scripts.
#include "report.hpp"

#include <cmath>
#include <cstdio>

namespace berth::bench {

namespace {

using ull = unsigned long long;

// x rounded to `decimals` places: the precision the result line has always had.
double fixed(double x, int decimals) {
    const double scale = std::pow(10.0, decimals);
    return std::round(x * scale) / scale;
}

Json error_samples(const Counters& counters) {
    Json samples = Json::array();
    for (auto& s : counters.samples) samples.push_back(s);
    return samples;
}

// Throughput and the server's CPU per unit of work.
struct Rates {
    double ops_s, mib_s, cpu_per_gib, cpu_us_per_op;
};

Rates rates_of(const RunOutcome& r) {
    const double cpu = r.server.cpu_s;
    const std::uint64_t ops = r.totals.ops, bytes = r.totals.bytes;
    return {ops / r.elapsed, bytes / r.elapsed / MiB,
            (cpu >= 0 && bytes > 0) ? cpu / (static_cast<double>(bytes) / GiB) : -1,
            (cpu >= 0 && ops > 0) ? cpu * 1e6 / ops : -1};
}

void print_connections(const Options& o, const RunOutcome& r) {
    if (r.tls)
        std::printf("  %s  connections opened %llu%s  TLS handshakes: resumed %llu, full %llu%s\n",
                    r.negotiated.c_str(), static_cast<ull>(r.conns.connections), o.reconnect ? " (one per op)" : "",
                    static_cast<ull>(r.conns.resumed), static_cast<ull>(r.conns.full),
                    o.resume ? "" : " (--no-resume)");
    else if (r.conns.connections)
        std::printf("  connections opened %llu%s\n", static_cast<ull>(r.conns.connections),
                    o.reconnect ? " (one per op)" : "");
}

void print_run(const Options& o, const Counters& counters, const RunOutcome& r) {
    const Rates x = rates_of(r);
    const Latency& l = r.totals.latency_ms;
    std::printf("workload %s  size %llu  concurrency %d  url %s\n", o.workload.c_str(), static_cast<ull>(o.size),
                o.concurrency, o.url.c_str());
    std::printf(
        "  ops %llu in %.2f s  %.1f ops/s  %.1f MiB/s  latency p50 %.3f ms  p90 %.3f ms  p99 %.3f ms  max %.3f "
        "ms\n",
        static_cast<ull>(r.totals.ops), r.elapsed, x.ops_s, x.mib_s, l.p50, l.p90, l.p99, l.max);
    std::printf("  errors %llu (status %llu, connection %llu, short read %llu, verify %llu)",
                static_cast<ull>(counters.total()), static_cast<ull>(counters.status.load()),
                static_cast<ull>(counters.connection.load()), static_cast<ull>(counters.short_read.load()),
                static_cast<ull>(counters.verify.load()));
    if (counters.post_fallbacks)
        std::printf("  single-POST fallbacks %llu", static_cast<ull>(counters.post_fallbacks.load()));
    std::printf("\n");
    for (auto& s : counters.samples) std::printf("    error: %s\n", s.c_str());
    print_connections(o, r);
    if (r.plan_exhausted)
        std::printf("  note: the pre-generated blob plan ran out (%llu blobs)\n", static_cast<ull>(r.planned));
    if (o.server_pid)
        std::printf(
            "  server pid %ld: cpu %.2f s (%.1f%% of one core)  cpu-s/GiB %.2f  cpu us/op %.1f  max VmRSS %.1f MiB "
            " VmHWM %.1f MiB\n",
            o.server_pid, r.server.cpu_s, r.elapsed > 0 ? 100 * r.server.cpu_s / r.elapsed : 0, x.cpu_per_gib,
            x.cpu_us_per_op, r.server.max_rss_kib / 1024.0, r.server.hwm_kib / 1024.0);
}

void print_fill(const Options& o, const Counters& counters, const FillOutcome& f) {
    const std::uint64_t ops = f.totals.ops;
    const Latency& l = f.totals.latency_ms;
    std::printf("workload fill-manifests  concurrency %d  url %s\n", o.concurrency, o.url.c_str());
    std::printf("  repositories %llu-%llu of %llu (%llu manifests each): blobs mounted %llu, uploaded %llu in %.2f s\n",
                static_cast<ull>(f.repo_lo), static_cast<ull>(f.repo_hi), static_cast<ull>(o.repos),
                static_cast<ull>(f.per_repo), static_cast<ull>(f.mounted), static_cast<ull>(f.uploaded),
                f.blob_seconds);
    std::printf(
        "  manifests %llu (%llu..%llu) in %.2f s  %.1f/s (%.1f/s with the blobs)  PUT p50 %.3f ms  p99 %.3f ms  "
        "max %.3f ms\n",
        static_cast<ull>(ops), static_cast<ull>(o.first), static_cast<ull>(f.next), f.manifest_seconds,
        ops / f.manifest_seconds, ops / f.seconds, l.p50, l.p99, l.max);
    std::printf("  errors %llu\n", static_cast<ull>(counters.total()));
    for (auto& s : counters.samples) std::printf("    error: %s\n", s.c_str());
    if (o.server_pid)
        std::printf("  server pid %ld: cpu %.2f s (%.1f µs per manifest)  max VmRSS %.1f MiB  VmHWM %.1f MiB\n",
                    o.server_pid, f.server.cpu_s, ops ? f.server.cpu_s * 1e6 / ops : 0, f.server.max_rss_kib / 1024.0,
                    f.server.hwm_kib / 1024.0);
}

}  // namespace

Json run_json(const Options& o, const Counters& counters, const RunOutcome& r) {
    const Rates x = rates_of(r);
    const Latency& l = r.totals.latency_ms;
    return {{"workload", o.workload},
            {"size", o.size},
            {"concurrency", o.concurrency},
            {"ops", r.totals.ops},
            {"bytes", r.totals.bytes},
            {"seconds", fixed(r.elapsed, 4)},
            {"ops_per_s", fixed(x.ops_s, 3)},
            {"mib_per_s", fixed(x.mib_s, 3)},
            {"p50_ms", fixed(l.p50, 4)},
            {"p90_ms", fixed(l.p90, 4)},
            {"p99_ms", fixed(l.p99, 4)},
            {"max_ms", fixed(l.max, 4)},
            {"errors", counters.total()},
            {"errors_status", counters.status.load()},
            {"errors_connection", counters.connection.load()},
            {"errors_short_read", counters.short_read.load()},
            {"errors_verify", counters.verify.load()},
            {"post_fallbacks", counters.post_fallbacks.load()},
            {"plan_exhausted", r.plan_exhausted},
            {"server_cpu_s", fixed(r.server.cpu_s, 4)},
            {"server_cpu_s_per_gib", fixed(x.cpu_per_gib, 4)},
            {"server_cpu_us_per_op", fixed(x.cpu_us_per_op, 3)},
            {"server_max_rss_kib", r.server.max_rss_kib},
            {"server_vmhwm_kib", r.server.hwm_kib},
            {"tls", r.tls},
            {"tls_negotiated", r.negotiated},
            {"reconnect", o.reconnect},
            {"resume", o.resume},
            {"connections", r.conns.connections},
            {"handshakes_resumed", r.conns.resumed},
            {"handshakes_full", r.conns.full},
            {"error_samples", error_samples(counters)}};
}

Json fill_json(const Options& o, const Counters& counters, const FillOutcome& f) {
    const std::uint64_t ops = f.totals.ops;
    const Latency& l = f.totals.latency_ms;
    return {{"workload", "fill-manifests"},
            {"concurrency", o.concurrency},
            {"repos", o.repos},
            {"per_repo", f.per_repo},
            {"repo_prefix", f.prefix},
            {"first", o.first},
            {"next", f.next},
            {"ops", ops},
            {"bytes", f.totals.bytes},
            {"seconds", fixed(f.seconds, 4)},
            {"blob_seconds", fixed(f.blob_seconds, 4)},
            {"manifest_seconds", fixed(f.manifest_seconds, 4)},
            {"repos_linked", f.repo_hi - f.repo_lo},
            {"blobs_mounted", f.mounted},
            {"blobs_uploaded", f.uploaded},
            {"ops_per_s", fixed(f.manifest_seconds > 0 ? ops / f.manifest_seconds : 0, 3)},
            {"p50_ms", fixed(l.p50, 4)},
            {"p99_ms", fixed(l.p99, 4)},
            {"max_ms", fixed(l.max, 4)},
            {"errors", counters.total()},
            {"server_cpu_s", fixed(f.server.cpu_s, 4)},
            {"server_max_rss_kib", f.server.max_rss_kib},
            {"server_vmhwm_kib", f.server.hwm_kib},
            {"error_samples", error_samples(counters)}};
}

void report_run(const Options& o, const Counters& counters, const RunOutcome& r) {
    if (!o.quiet) print_run(o, counters, r);
    if (o.json) print_json_line(run_json(o, counters, r));
    std::fflush(stdout);
}

void report_fill(const Options& o, const Counters& counters, const FillOutcome& f) {
    if (!o.quiet) print_fill(o, counters, f);
    if (o.json) print_json_line(fill_json(o, counters, f));
    std::fflush(stdout);
}

void report_setup_error(const Options& o, const std::exception& e) {
    std::fprintf(stderr, "berth-bench: setup failed: %s\n", e.what());
    if (o.json) print_json_line({{"workload", o.workload}, {"setup_error", e.what()}});
}

void report_setup_only(const std::string& repo, const std::string& tag) {
    print_json_line({{"repo", repo},
                     {"tag", tag},
                     {"manifest_path", "/v2/" + repo + "/manifests/" + tag},
                     {"tags_path", "/v2/" + repo + "/tags/list"}});
}

void print_json_line(const Json& j) { std::printf("%s\n", to_text(j).c_str()); }

}  // namespace berth::bench
