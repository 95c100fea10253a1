#pragma once
#include <atomic>
#include <boost/asio/thread_pool.hpp>

#include "berth/http/server.hpp"
#include "berth/net/client.hpp"
#include "berth/oci/derived_keys.hpp"
#include "berth/replication/cluster.hpp"
#include "berth/replication/peer_service.hpp"
#include "message.hpp"
#include "client_limits.hpp"
#include "cursors.hpp"
#include "party_pools.hpp"
#include "request_metrics.hpp"
#include "ui_session.hpp"

namespace berth::http {

// The UI sessions' own secret's key, else one derived from the cluster's secret for them alone,
// else "" (a key drawn at start).
inline std::string ui_session_key(const UiOptions& ui, const replication::PeerService* peers) {
    constexpr std::string_view purpose = "berth ui session";
    if (!ui.session_secret.empty()) return oci::DerivedKeys(ui.session_secret).key(purpose);
    return peers ? peers->derived_key(purpose) : std::string();
}

// What every connection shares.
struct ServerContext {
    ServerContext(ServerOptions opts, Services svc, unsigned workers)
        : options(std::move(opts)), services(svc),
          ui_sessions(ui_session_key(options.ui, services.peers), options.ui.session_lifetime),
          cursors(services.peers ? services.peers->derived_key("berth paging cursor") : std::string()),
          worker_pool(workers), client_limits(options.max_connections_per_client, options.requests_per_second) {
        services.ui = &options.ui;
        services.ui_sessions = &ui_sessions;
        services.cursors = &cursors;
    }

    ServerOptions options;
    Services services;
    UiSessions ui_sessions;
    Cursors cursors;
    boost::asio::thread_pool worker_pool;
    // One pool per upstream and one for the peers: 16 threads each, like an
    // upstream's default max_concurrent, and a queue of 256 behind them.
    PartyPools party_pools{16, 256};
    std::atomic<std::size_t> connections{0};
    std::atomic<std::size_t> in_flight{0};
    std::atomic<bool> draining{false};
    std::atomic<std::uint64_t> next_request_id{1};
    RequestMetrics request_metrics;
    ClientLimits client_limits;
};

}  // namespace berth::http
