#pragma once
// What a run prints: a human-readable summary on stdout (unless --quiet) and, with --json,
// one JSON line. bench/compare, bench/scaling and bench/smoke.sh read that line, so its
// field names and value types are an interface.
#include <cstdint>
#include <exception>
#include <string>

#include "http_client.hpp"
#include "json_text.hpp"
#include "options.hpp"
#include "server_stats.hpp"
#include "stats.hpp"

namespace berth::bench {

// The timed part of a push, pull, mixed, manifest or tags-list run.
struct RunOutcome {
    Totals totals;
    double elapsed = 0;  // seconds
    ServerUsage server;
    Conn::Stats conns;
    std::string negotiated;  // TLS version and suite of the first connection ("" for http://)
    bool tls = false;
    bool plan_exhausted = false;  // a push ran out of the blobs prepared for it
    std::uint64_t planned = 0;
};

// A fill-manifests run.
struct FillOutcome {
    std::string prefix;
    std::uint64_t per_repo = 0;
    std::uint64_t repo_lo = 0, repo_hi = 0;  // repositories linked: [repo_lo, repo_hi)
    std::uint64_t mounted = 0, uploaded = 0;
    std::uint64_t next = 0;  // manifests filled: first .. next-1
    Totals totals;
    double seconds = 0, blob_seconds = 0, manifest_seconds = 0;
    ServerUsage server;
};

// The result line of a run and of a fill.
Json run_json(const Options& o, const Counters& counters, const RunOutcome& r);
Json fill_json(const Options& o, const Counters& counters, const FillOutcome& f);

// The summary (unless --quiet) and the JSON line (with --json) of a run and of a fill.
void report_run(const Options& o, const Counters& counters, const RunOutcome& r);
void report_fill(const Options& o, const Counters& counters, const FillOutcome& f);

// A setup that failed: the message on stderr and, with --json, {"workload", "setup_error"}.
void report_setup_error(const Options& o, const std::exception& e);

// --setup-only: where the prepared repository's manifest and tags list are.
void report_setup_only(const std::string& repo, const std::string& tag);

// One JSON document on one line of stdout.
void print_json_line(const Json& j);

}  // namespace berth::bench
