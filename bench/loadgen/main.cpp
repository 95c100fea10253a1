// berth-bench: a load generator for OCI distribution-spec registries.
//
// One blocking HTTP/1.1 keep-alive connection per worker thread (POSIX sockets),
// SHA-256 through OpenSSL EVP. Every blob's content and digest are prepared before
// the clock starts (blobs.hpp); bodies go out with sendfile(2) from memfds
// (pool_memory.hpp), or over TLS with SSL_write straight from the mapping
// (http_client.hpp).
//
// Run `berth-bench --help` for the workloads and flags.
#include <signal.h>

#include <cstdio>
#include <exception>

#include "endpoint.hpp"
#include "options.hpp"
#include "tls.hpp"
#include "workloads/workloads.hpp"

namespace berth::bench {
namespace {

int run(const Options& o) {
    Endpoint ep = parse_url(o.url);
    TlsContext tls = make_tls_context(ep, o);  // before the clients: their connections use it
    if (o.workload == "fill-manifests") return run_fill(o, ep, tls.get());
    return run_workload(o, ep, tls.get());
}

}  // namespace
}  // namespace berth::bench

int main(int argc, char** argv) {
    signal(SIGPIPE, SIG_IGN);
    try {
        return berth::bench::run(berth::bench::parse_options(argc, argv));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "berth-bench: %s\n", e.what());
        return 2;
    }
}
