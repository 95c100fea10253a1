#pragma once
#include <atomic>
#include <boost/asio/thread_pool.hpp>

#include "berth/http/server.hpp"

namespace berth::http {

// What every connection shares.
struct ServerContext {
    ServerContext(ServerOptions opts, registry::Registry& reg, unsigned workers)
        : options(std::move(opts)), registry(reg), worker_pool(workers) {}

    ServerOptions options;
    registry::Registry& registry;
    boost::asio::thread_pool worker_pool;
    std::atomic<std::size_t> connections{0};
    std::atomic<std::size_t> in_flight{0};
    std::atomic<bool> draining{false};
    std::atomic<std::uint64_t> next_request_id{1};
};

}  // namespace berth::http
