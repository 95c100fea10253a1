#pragma once
// The HTTP front end: accepts connections, parses requests within limits, and
// answers them from the registry. Beast stays behind this header.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "berth/http/services.hpp"
#include "berth/ui/options.hpp"

namespace berth::http {

// Forward-secret AEAD suites only, as Mozilla's "intermediate" profile.
inline constexpr const char* default_tls_ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

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
    // 32 bytes that seal paging cursors (http/cursors.hpp); "": derived from the peers' secret, or
    // this process's own without peers.
    std::string cursor_key;
    // Hand send keys to the kernel where it has TLS (kTLS), so blobs go out
    // with sendfile(2); elsewhere OpenSSL encrypts (the log says which is offered,
    // berth_tls_connections_total{encryption} which each connection got).
    bool tls_kernel = true;
    // Without the kernel's, seal TLS 1.3 AES-GCM records in berth's own code
    // from the bytes sent straight into the send buffer (one copy fewer than
    // OpenSSL's record layer); false leaves every record to OpenSSL.
    bool tls_berth_records = true;
    // TLS 1.2 cipher suites (an OpenSSL cipher string); TLS 1.3 has only AEAD suites.
    std::string tls_ciphers = default_tls_ciphers;
    bool tls() const { return !tls_cert_file.empty(); }
    ui::Options ui;
    // The node agent's second listener, for fellow agents (agent.peers): mTLS, blob and manifest
    // reads only, each a fellow agent's read (registry::Asker::replica).
    bool agent_peer_listener = false;
    // The name a client certificate must carry to be a node agent's (POST /_berth/v1/agents, the
    // agents' listener): any other certificate the client CA signed is no agent.
    std::string agent_cert_name = "berth-agent";
    // backup.secret_file: POST and GET /_berth/v1/backup need it as a Bearer token ("": refused).
    std::string backup_secret;
};

// Descriptors are a budget: raises the soft RLIMIT_NOFILE to the hard limit
// and logs both; throws std::runtime_error, naming both numbers, when
// max_connections plus the headroom berth needs besides (files, RocksDB,
// upstream and peer connections) does not fit.
void raise_descriptor_limit(std::size_t max_connections);

class Server {
public:
    // GET /metrics answers what services.metrics' sources write; the server adds its own to
    // metrics (requests, connections).
    Server(ServerOptions options, Services services, observe::MetricsRegistry& metrics);
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
