#pragma once
#include <atomic>
#include <boost/asio/thread_pool.hpp>

#include "berth/http/server.hpp"
#include "berth/replication/peer_service.hpp"
#include "message.hpp"
#include "client_limits.hpp"
#include "cursors.hpp"
#include "party_pools.hpp"
#include "request_metrics.hpp"
#include "berth/ui/sessions.hpp"

namespace berth::http {

// What every connection shares.
struct ServerContext {
    ServerContext(ServerOptions opts, Services svc, unsigned workers)
        : options(std::move(opts)), services(svc),
          ui_sessions(ui::Sessions::key_for(options.ui, services.peers), options.ui.session_lifetime),
          cursors(!options.cursor_key.empty() ? options.cursor_key
                  : services.peers            ? services.peers->derived_key("berth paging cursor")
                                              : std::string()),
          handlers{options, services, cursors, ui_sessions}, worker_pool(workers),
          client_limits(options.max_connections_per_client, options.requests_per_second) {}

    ServerOptions options;
    Services services;
    ui::Sessions ui_sessions;
    Cursors cursors;
    Context handlers;  // what the handlers see of all this
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
