#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "berth/net/client.hpp"

namespace berth::replication {

enum class WriteQuorum { local, quorum, all };

// How long the change log keeps entries (replication.log_retention_seconds,
// replication.log_max_entries).
struct LogRetention {
    std::chrono::seconds window{3600};
    std::uint64_t max_entries = 1000000;
};

struct Options {
    // HOST:PORT of every replica; this replica may be listed too (it is
    // recognised by its replica id and skipped).
    std::vector<std::string> peers;
    // HOST:PORT resolved on every round, e.g. the headless Service of a StatefulSet.
    std::string peer_dns;
    std::string secret;  // shared by all replicas; empty disables the peer API
    WriteQuorum write_quorum = WriteQuorum::quorum;
    std::chrono::milliseconds quorum_timeout{10000};
    std::chrono::milliseconds poll_interval{100};
    unsigned bootstrap_parallelism = 8;
    LogRetention log_retention;
    // Replicas serving TLS talk TLS to each other, presenting their own certificate.
    net::TlsOptions tls;

    bool enabled() const { return !peers.empty() || !peer_dns.empty(); }
};

// What other layers' configuration says about repositories' content.
struct ContentRules {
    // Repositories mirroring an upstream (proxy::mirrors): their manifests
    // replicate without blobs, which every replica fetches when first read.
    std::function<bool(const std::string& repo)> mirrored;
    // Repository globs that accept manifests without all their content (registry::Options).
    std::vector<std::string> sparse;
};

}  // namespace berth::replication
