// The command line: flags, defaults, the usage text and the checks between the flags.
#include "options.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <stdexcept>
#include <string>

namespace berth::bench {

namespace {

[[noreturn]] void usage(int code) {
    std::fprintf(code ? stderr : stdout, R"(Usage: berth-bench [flags]

Workloads (--workload NAME):
  push-monolithic  POST /blobs/uploads/, then PUT ?digest= with the whole blob
  push-post        single POST /blobs/uploads/?digest= with the blob as body
                   (a 202 answer falls back to PUT with the body, per the spec;
                   fallbacks are counted)
  push-chunked     POST, PATCH chunks of --chunk bytes with Content-Range, PUT ?digest=
                   (every push also PUTs a small OCI manifest referencing the blob
                   under a new tag)
  pull             GET manifest by tag, then GET the blob it names; bytes verified
  mixed            alternate ops: push-monolithic, pull
  manifest-get     GET a manifest by tag
  manifest-head    HEAD a manifest by tag
  tags-list        GET /v2/<repo>/tags/list of a repository with --tags tags
  fill-manifests   populate a registry fast: --ops distinct manifests (all sharing one
                   config blob and one 1 KiB layer, told apart by an annotation),
                   each PUT by its own tag, spread over --repos repositories; the
                   two blobs are pushed once and mounted into every new repository
                   first (timed too). Manifest i (from --first) goes to
                   <prefix>/r<i / P, 5 digits> as tag t<i, 7 digits>, with
                   P = ceil(--total / --repos), so a fill can be grown in steps

Flags:
  --url URL            registry base URL, http:// or https:// (default http://127.0.0.1:5000)
  --workload NAME      see above (default push-monolithic)
  --size BYTES         blob size; suffixes K, M, G = KiB, MiB, GiB (default 1M)
  --concurrency N      connections, one thread each (default 1)
  --seconds S          stop starting ops after S seconds
  --ops N              stop after N ops (default: 10 s if neither is given)
  --chunk BYTES        push-chunked chunk size (default 5M)
  --images N           pull/mixed: distinct images to pull (default: automatic)
  --tags N             tags-list: tags in the repository (default 100)
  --repos R            fill-manifests: repositories of the whole fill (default 10000)
  --first K            fill-manifests: index of the first manifest to PUT (default 0)
  --total T            fill-manifests: manifests of the whole fill (default --first + --ops)
  --repo-prefix P      fill-manifests: repository name prefix (default fill)
  --progress S         fill-manifests: print progress to stderr every S seconds
  --server-pid PID     sample the server's CPU time and RSS from /proc
  --timeout S          socket send/receive timeout (default 120)
  --cacert FILE        https: verify the server's certificate (and host name or
                       address) against the CAs in FILE instead of the system's
  --insecure           https: do not verify the server's certificate
  --tls-ciphersuites L TLS 1.3 suites to offer, in order of preference, colon-separated
                       (default OpenSSL's: TLS_AES_256_GCM_SHA384 first)
  --reconnect          open a new connection for every op (closed after it)
  --no-resume          https: full handshake on every new connection (by default a
                       connection resumes the session of the client's previous one)
  --setup-only         do the setup (manifest-*/tags-list) and print repo/tag as JSON
  --json               print the result as one JSON line (after the text unless --quiet)
  --quiet              no human-readable output
)");
    std::exit(code);
}

}  // namespace

std::uint64_t parse_size(const std::string& text) {
    char* end = nullptr;
    double value = std::strtod(text.c_str(), &end);
    std::string suffix(end);
    std::uint64_t mult = 1;
    if (suffix == "K" || suffix == "k" || suffix == "KiB") mult = 1ull << 10;
    else if (suffix == "M" || suffix == "m" || suffix == "MiB") mult = MiB;
    else if (suffix == "G" || suffix == "g" || suffix == "GiB") mult = GiB;
    else if (!suffix.empty()) throw std::invalid_argument("bad size: " + text);
    if (value < 0) throw std::invalid_argument("bad size: " + text);
    return static_cast<std::uint64_t>(value * mult);
}

Options parse_options(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "%s needs a value\n", a.c_str());
                usage(2);
            }
            return argv[++i];
        };
        if (a == "--help" || a == "-h") usage(0);
        else if (a == "--url") o.url = next();
        else if (a == "--workload") o.workload = next();
        else if (a == "--size") o.size = parse_size(next());
        else if (a == "--concurrency" || a == "-c") o.concurrency = std::stoi(next());
        else if (a == "--seconds") o.seconds = std::stod(next());
        else if (a == "--ops") o.ops = std::stoull(next());
        else if (a == "--chunk") o.chunk = parse_size(next());
        else if (a == "--images") o.images = std::stoi(next());
        else if (a == "--tags") o.tags = std::stoi(next());
        else if (a == "--repos") o.repos = std::stoull(next());
        else if (a == "--first") o.first = std::stoull(next());
        else if (a == "--total") o.total = std::stoull(next());
        else if (a == "--repo-prefix") o.repo_prefix = next();
        else if (a == "--progress") o.progress = std::stod(next());
        else if (a == "--server-pid") o.server_pid = std::stol(next());
        else if (a == "--timeout") o.timeout = std::stod(next());
        else if (a == "--cacert") o.cacert = next();
        else if (a == "--insecure") o.insecure = true;
        else if (a == "--tls-ciphersuites") o.ciphersuites = next();
        else if (a == "--reconnect") o.reconnect = true;
        else if (a == "--no-resume") o.resume = false;
        else if (a == "--setup-only") o.setup_only = true;
        else if (a == "--json") o.json = true;
        else if (a == "--quiet") o.quiet = true;
        else {
            std::fprintf(stderr, "unknown flag %s\n", a.c_str());
            usage(2);
        }
    }
    static const char* known[] = {"push-monolithic", "push-post",     "push-chunked", "pull",          "mixed",
                                  "manifest-get",    "manifest-head", "tags-list",    "fill-manifests"};
    if (std::find_if(std::begin(known), std::end(known), [&](const char* k) { return o.workload == k; }) ==
        std::end(known)) {
        std::fprintf(stderr, "unknown workload %s\n", o.workload.c_str());
        usage(2);
    }
    if (o.concurrency < 1) o.concurrency = 1;
    if (o.chunk == 0) o.chunk = 5 * MiB;
    if (o.workload == "fill-manifests") {
        if (o.ops == 0) {
            std::fprintf(stderr, "fill-manifests needs --ops\n");
            usage(2);
        }
        if (o.repos == 0) o.repos = 1;
        if (o.total == 0) o.total = o.first + o.ops;
        if (o.total < o.first + o.ops) {
            std::fprintf(stderr, "--total must cover --first + --ops\n");
            usage(2);
        }
    }
    if (o.seconds <= 0 && o.ops == 0) o.seconds = 10;
    if (o.size == 0) o.size = 1;
    return o;
}

}  // namespace berth::bench
