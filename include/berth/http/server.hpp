#pragma once
// The HTTP front end: accepts connections, parses requests within limits, and
// answers them from the registry. Beast stays behind this header.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace berth::registry {
class Registry;
}
namespace berth::replication {
class Cluster;
class PeerService;
}  // namespace berth::replication
namespace berth::auth {
class Authorizer;
class DelegatedAccess;
}  // namespace berth::auth
namespace berth::observe {
class MetricsRegistry;
}
namespace berth::storage {
class BackupJob;
}
namespace berth::registry {
class Retention;
}

namespace berth::http {

// Forward-secret AEAD suites only, as Mozilla's "intermediate" profile.
inline constexpr const char* default_tls_ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

// The web UI at /ui/ (docs/ui.md), config `ui`.
struct UiOptions {
    bool enabled = true;
    // What pull commands name, e.g. "registry.example.com"; "": the address the browser used.
    std::string registry_host;
    // How long a sign-in lasts (never past the credential it came from); it cannot be renewed.
    std::chrono::seconds session_lifetime{3600};
    // ui.session_secret_file: the sessions' own secret. Without it their key is derived from the
    // cluster's secret under its own label, or drawn at start by a replica alone.
    std::string session_secret;
};

struct ServerOptions {
    std::string host = "127.0.0.1";
    std::uint16_t port = 5000;
    unsigned io_threads = 0;      // 0: one per core
    unsigned worker_threads = 0;  // 0: four per core, for fsync and other blocking work
    std::size_t max_header_bytes = 16 * 1024;
    std::size_t max_connections = 10000;
    std::size_t max_connections_per_client = 1000;  // by address; 0: no limit
    // Token bucket per client address, burst twice the rate; 0: no limit.
    // Off by default: behind an ingress or NAT every client has one address.
    std::uint32_t requests_per_second = 0;
    std::chrono::seconds idle_timeout{60};  // waiting for (the rest of) a request head
    std::chrono::seconds body_timeout{60};  // no progress while reading or sending a body
    std::chrono::seconds shutdown_grace{10};
    bool access_log = true;
    // TCP congestion control for clients on this host ("" keeps the system's
    // for them too): reno paces nothing, and pacing only costs CPU there.
    std::string same_host_congestion = "reno";
    // TLS: with a certificate and key, every connection is TLS 1.2 or newer.
    // The files are read again when they change, without a restart.
    std::string tls_cert_file, tls_key_file;
    std::string tls_client_ca_file;  // with it, client certificates must be signed by it
    // False: a client may present no certificate (probes, clients with tokens),
    // but one it presents must verify.
    bool tls_client_cert_required = true;
    // Hand send keys to the kernel where it has TLS (kTLS), so blobs go out
    // with sendfile(2). Opt-in: the path has not yet run on a kernel with TLS.
    bool tls_kernel = false;
    // TLS 1.2 cipher suites (an OpenSSL cipher string); TLS 1.3 has only AEAD suites.
    std::string tls_ciphers = default_tls_ciphers;
    bool tls() const { return !tls_cert_file.empty(); }
    UiOptions ui;
};

// Descriptors are a budget: raises the soft RLIMIT_NOFILE to the hard limit
// and logs both; throws std::runtime_error, naming both numbers, when
// max_connections plus the headroom berth needs besides (files, RocksDB,
// upstream and peer connections) does not fit.
void raise_descriptor_limit(std::size_t max_connections);

class Server {
public:
    // GET /metrics answers what metrics' sources write; the server adds its own (requests,
    // connections). peers and cluster may be null: a single registry without peers;
    // authorizer null: no authentication; delegated: the node agent's door, where the replicas
    // decide who reads; retention: what the web UI's retention page asks (null: no policies).
    Server(ServerOptions options, registry::Registry& registry, observe::MetricsRegistry& metrics,
           replication::PeerService* peers = nullptr, const replication::Cluster* cluster = nullptr,
           const auth::Authorizer* authorizer = nullptr, auth::DelegatedAccess* delegated = nullptr,
           storage::BackupJob* backups = nullptr, registry::Retention* retention = nullptr);
    ~Server();

    // Binds; after this port() is the real port (useful with port 0).
    void bind();
    std::uint16_t port() const;
    // Serves until SIGINT/SIGTERM or stop(), then drains in-flight requests.
    void run();
    void stop();
    // With TLS: takes the certificate and key files again if they changed and are a valid pair
    // (new connections get them); otherwise logs why and keeps the old ones.
    void reload_tls();
    // Runs when shutdown begins, so long-running tasks can stop early.
    void on_shutdown(std::function<void()> callback);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace berth::http
