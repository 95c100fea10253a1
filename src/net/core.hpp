#pragma once
// What the Client's I/O threads, its Exchanges and its pool share. An
// Exchange may outlive the Client, so this is shared rather than owned.
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/steady_timer.hpp>
#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

#include "connection.hpp"

namespace berth::net {

class Core {
public:
    explicit Core(ClientOptions options);
    ~Core();

    const ClientOptions options;
    asio::io_context io;

    // A pooled connection that still looks alive, or (always when fresh) a new unconnected one.
    std::shared_ptr<Connection> take(const Origin& origin, bool fresh);
    // On the connection's strand, with no operation pending on it.
    void give_back(std::shared_ptr<Connection> connection);

    // Closes the pool and every live connection, failing what is in flight;
    // the I/O threads then run out of work.
    void shut_down();
    // After the I/O threads are gone: nothing runs handlers any more.
    void mark_stopped() { stopped_ = true; }
    bool stopped() const { return stopped_; }

private:
    struct Idle {
        std::shared_ptr<Connection> connection;
        std::chrono::steady_clock::time_point since;
    };

    static std::string pool_key(const Origin& origin);
    std::shared_ptr<asio::ssl::context> tls_context(const Origin& origin);  // under mutex_
    void arm_sweep();                                                       // under mutex_
    void sweep();
    static void close_later(const std::shared_ptr<Connection>& connection);

    std::mutex mutex_;
    std::map<std::string, std::deque<Idle>> idle_;  // newest at the back
    struct TlsContext {
        std::shared_ptr<asio::ssl::context> context;
        std::string version;  // of the files it was loaded from
    };
    std::map<std::string, TlsContext> tls_contexts_;
    std::vector<std::weak_ptr<Connection>> live_;
    std::size_t live_pruned_at_ = 16;
    bool shutting_down_ = false;
    bool sweep_armed_ = false;
    Strand sweep_strand_;
    asio::steady_timer sweep_timer_;
    asio::executor_work_guard<asio::io_context::executor_type> work_;
    std::atomic<bool> stopped_ = false;
};

}  // namespace berth::net
