#pragma once
// The workloads of berth-bench (see options.cpp's usage text): each prepares what it
// needs, runs its timed part on --concurrency threads of one connection each, and
// reports. They return the process's exit code: 0, 1 when the setup failed, 3 when an
// op failed.
#include <openssl/ssl.h>

#include "endpoint.hpp"
#include "options.hpp"

namespace berth::bench {

// push-monolithic, push-post, push-chunked, pull, mixed, manifest-get, manifest-head, tags-list.
int run_workload(const Options& o, const Endpoint& ep, SSL_CTX* tls);

// fill-manifests: many small distinct manifests, as fast as the server takes them.
int run_fill(const Options& o, const Endpoint& ep, SSL_CTX* tls);

}  // namespace berth::bench
