#pragma once
#include <atomic>
#include <boost/asio/thread_pool.hpp>

#include "berth/http/server.hpp"
#include "berth/net/client.hpp"
#include "berth/replication/cluster.hpp"
#include "message.hpp"
#include "client_limits.hpp"
#include "party_pools.hpp"
#include "request_metrics.hpp"
#include "ui_session.hpp"

namespace berth::http {

// What every connection shares.
struct ServerContext {
    ServerContext(ServerOptions opts, Services svc, unsigned workers)
        : options(std::move(opts)), services(svc),
          ui_sessions(services.cluster ? services.cluster->secret() : std::string(), options.ui.session_lifetime),
          worker_pool(workers), client_limits(options.max_connections_per_client, options.requests_per_second) {
        services.client = &client;
        services.ui = &options.ui;
        services.ui_sessions = &ui_sessions;
    }

    ServerOptions options;
    Services services;
    UiSessions ui_sessions;
    net::Client client;  // before the workers: none may still use it when it goes
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
