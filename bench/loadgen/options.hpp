#pragma once
// The command line of berth-bench: its flags, their defaults and the checks between them.
#include <cstdint>
#include <string>

namespace berth::bench {

constexpr std::uint64_t MiB = 1ull << 20;
constexpr std::uint64_t GiB = 1ull << 30;

struct Options {
    std::string url = "http://127.0.0.1:5000";
    std::string workload = "push-monolithic";
    std::uint64_t size = MiB;
    int concurrency = 1;
    double seconds = 0;
    std::uint64_t ops = 0;
    std::uint64_t chunk = 5 * MiB;
    int images = 0;  // pull/mixed: distinct images to pull from (0: automatic)
    int tags = 100;  // tags-list: tags in the listed repository
    // fill-manifests: manifest i goes to repository <repo_prefix>/r<i / per_repo> as tag t<i>,
    // per_repo = ceil(total / repos); this run PUTs manifests first .. first+ops-1.
    std::uint64_t repos = 10000;
    std::uint64_t first = 0;
    std::uint64_t total = 0;  // 0: first + ops
    std::string repo_prefix = "fill";
    double progress = 0;  // fill-manifests: a progress line on stderr every this many seconds (0: none)
    long server_pid = 0;
    bool json = false;
    bool setup_only = false;
    bool quiet = false;
    double timeout = 120;
    std::string cacert;        // https: trust the CAs in this file instead of the system's
    bool insecure = false;     // https: no certificate check at all
    std::string ciphersuites;  // https: TLS 1.3 suites offered, in order (empty: OpenSSL's default)
    bool reconnect = false;    // a new connection for every op
    bool resume = true;        // https: a new connection offers the previous one's session
};

// BYTES with an optional suffix K, M, G (KiB, MiB, GiB); throws std::invalid_argument.
std::uint64_t parse_size(const std::string& text);

// The options of argv; prints the usage and exits on --help (0) or a bad command line (2).
Options parse_options(int argc, char** argv);

}  // namespace berth::bench
