#include "berth/http/server.hpp"
#include "berth/registry/registry.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "berth/observe/log.hpp"
#include "berth/observe/metrics.hpp"
#include "congestion.hpp"
#include "context.hpp"
#include "session.hpp"

namespace berth::http {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

unsigned cores() { return std::max(1u, std::thread::hardware_concurrency()); }

std::shared_ptr<asio::ssl::context> make_tls_context(const ServerOptions& options) {
    auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
    ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                     asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1 |
                     asio::ssl::context::single_dh_use);
    SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
    // TLS 1.2 suites: AEAD only (OpenSSL's default list still offers CBC, open to LUCKY13-style timing).
    if (SSL_CTX_set_cipher_list(ctx->native_handle(), options.tls_ciphers.c_str()) != 1)
        throw std::runtime_error("tls.ciphers: OpenSSL accepts none of \"" + options.tls_ciphers + "\"");
    if (options.tls_berth_records || options.tls_kernel)
        SSL_CTX_set_keylog_callback(ctx->native_handle(), &tls_key_logged);
    ctx->use_certificate_chain_file(options.tls_cert_file);
    ctx->use_private_key_file(options.tls_key_file, asio::ssl::context::pem);
    if (!options.tls_client_ca_file.empty()) {
        // A session resumed under client verification must name its context, or OpenSSL fails the handshake.
        static constexpr unsigned char session_context[] = "berth";
        SSL_CTX_set_session_id_context(ctx->native_handle(), session_context, sizeof session_context - 1);
        ctx->load_verify_file(options.tls_client_ca_file);
        ctx->set_verify_mode(options.tls_client_cert_required
                                 ? asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert
                                 : asio::ssl::verify_peer);
    }
    return ctx;
}

asio::ip::address unmapped(const asio::ip::address& address) {
    if (address.is_v6() && address.to_v6().is_v4_mapped())
        return asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6());
    return address;
}

// Loopback, or the host's own address: the kernel routes both over loopback.
bool on_this_host(const tcp::socket& socket, const tcp::endpoint& peer) {
    const auto address = unmapped(peer.address());
    if (address.is_loopback()) return true;
    boost::system::error_code ec;
    const auto local = socket.local_endpoint(ec);
    return !ec && unmapped(local.address()) == address;
}

std::filesystem::file_time_type modified(const std::string& file) {
    std::error_code ec;
    auto time = std::filesystem::last_write_time(file, ec);
    return ec ? std::filesystem::file_time_type{} : time;
}

// An exception out of a handler unwinds that handler (and with it the
// connection it held), then the loop goes on serving everyone else.
void run_guarded(asio::io_context& io) {
    for (;;) {
        try {
            io.run();
            return;
        } catch (const std::exception& error) {
            observe::log("error", "a handler threw; its connection was closed", {{"error", error.what()}});
        } catch (...) {
            observe::log("error", "a handler threw; its connection was closed", {{"error", "unknown exception"}});
        }
    }
}

}  // namespace

struct Server::Impl {
    Impl(ServerOptions options, Services services)
        : context(options, services, options.worker_threads ? options.worker_threads : 4 * cores()),
          ios(make_io_contexts(options.io_threads ? options.io_threads : cores())), io(*ios.front()), acceptor(io),
          signals(io, SIGINT, SIGTERM) {
        for (std::size_t i = 1; i < ios.size(); ++i) keep_running.push_back(asio::make_work_guard(*ios[i]));
    }

    // One io_context per I/O thread, each connection on one of them: a
    // connection's handlers never run on two threads, so sessions need no
    // strand and the threads share no scheduler lock.
    static std::vector<std::unique_ptr<asio::io_context>> make_io_contexts(unsigned threads) {
        std::vector<std::unique_ptr<asio::io_context>> out;
        for (unsigned i = 0; i < threads; ++i) out.push_back(std::make_unique<asio::io_context>(1));
        return out;
    }

    // Sessions left in an io_context when it is destroyed still touch the
    // context, so the context is declared first and outlives them.
    ServerContext context;
    std::vector<std::unique_ptr<asio::io_context>> ios;
    asio::io_context& io;  // the first: listener, signals and timers live here
    std::vector<asio::executor_work_guard<asio::io_context::executor_type>> keep_running;
    std::size_t next_io = 0;
    tcp::acceptor acceptor;
    SameHostCongestion congestion;
    asio::signal_set signals;
    // accept(2) failing for want of descriptors is retried after this, doubled up to a second.
    std::chrono::milliseconds accept_pause{0};
    asio::steady_timer accept_timer{io};
    std::vector<std::function<void()>> shutdown_callbacks;
    bool stopping = false;

    // The TLS context new connections get; replaced when the files change.
    std::mutex tls_mutex;
    std::shared_ptr<asio::ssl::context> tls;
    std::filesystem::file_time_type tls_cert_time{}, tls_key_time{};

    std::shared_ptr<asio::ssl::context> current_tls() {
        std::lock_guard lock(tls_mutex);
        return tls;
    }

    void reload_tls(bool first) {
        auto& options = context.options;
        auto cert_time = modified(options.tls_cert_file), key_time = modified(options.tls_key_file);
        {
            std::lock_guard lock(tls_mutex);
            if (!first && cert_time == tls_cert_time && key_time == tls_key_time) return;
        }
        try {
            auto fresh = make_tls_context(options);
            std::lock_guard lock(tls_mutex);
            tls = std::move(fresh);
            tls_cert_time = cert_time;
            tls_key_time = key_time;
            if (!first) observe::log("info", "reloaded TLS certificate", {{"cert", options.tls_cert_file}});
            if (first) {
                observe::log("info", "TLS",
                             {{"sending", tls_sending_said(options.tls_kernel, options.tls_berth_records)}});
            }
        } catch (const std::exception& error) {
            if (first) throw;
            // A half-written pair (cert renewed, key not yet): keep serving with the old one.
            observe::log("warn", "TLS reload failed; keeping the current certificate", {{"error", error.what()}});
        }
    }

    void accept() {
        auto& target = *ios[next_io++ % ios.size()];
        acceptor.async_accept(target, [this](boost::system::error_code ec, tcp::socket socket) {
            if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
            if (ec) return pause_accepting(ec);
            accept_pause = std::chrono::milliseconds(0);
            auto peer = socket.remote_endpoint(ec);
            const auto address = ec ? std::string() : peer.address().to_string();
            if (context.connections.load() >= context.options.max_connections || !context.client_limits.open(address)) {
                boost::system::error_code ignored;
                socket.close(ignored);  // over a limit: refuse rather than queue
            } else {
                socket.set_option(tcp::no_delay(true), ec);
                congestion.accepted(socket.native_handle(), on_this_host(socket, peer));
                start_session(std::move(socket), context, current_tls());
            }
            accept();
        });
    }

    // Out of descriptors (EMFILE, ENFILE) or memory, accept fails again at
    // once for as long as that lasts: wait for connections to close instead
    // of spinning. The pending connections wait in the kernel's backlog.
    void pause_accepting(const boost::system::error_code& ec) {
        ++context.request_metrics.accept_backoffs;
        accept_pause = std::clamp(accept_pause * 2, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
        if (accept_pause == std::chrono::milliseconds(10) || accept_pause == std::chrono::milliseconds(1000))
            observe::log("warn", "accept failed; pausing the listener",
                         {{"error", ec.message()},
                          {"pause_ms", accept_pause.count()},
                          {"connections", context.connections.load()}});
        accept_timer.expires_after(accept_pause);
        accept_timer.async_wait([this](boost::system::error_code wait_ec) {
            if (!wait_ec && acceptor.is_open()) accept();
        });
    }

    void stop_all() {
        for (auto& each : ios) each->stop();
    }

    // Stop taking connections, let in-flight requests finish within the grace period.
    void begin_shutdown() {
        if (stopping) return;
        stopping = true;
        observe::log("info", "shutting down", {{"in_flight", context.in_flight.load()}});
        context.draining = true;
        for (auto& callback : shutdown_callbacks) callback();
        boost::system::error_code ec;
        acceptor.close(ec);
        signals.cancel(ec);
        accept_timer.cancel();
        auto deadline = std::chrono::steady_clock::now() + context.options.shutdown_grace;
        auto poll = std::make_shared<asio::steady_timer>(io);
        auto check = std::make_shared<std::function<void()>>();
        *check = [this, poll, check, deadline] {
            if (context.in_flight.load() == 0 || std::chrono::steady_clock::now() >= deadline) {
                stop_all();
                *check = nullptr;  // breaks the self-reference
                return;
            }
            poll->expires_after(std::chrono::milliseconds(20));
            poll->async_wait([check](boost::system::error_code) {
                if (*check) (*check)();
            });
        };
        (*check)();
    }
};

Server::Server(ServerOptions options, Services services, observe::MetricsRegistry& metrics)
    : impl_(std::make_unique<Impl>(std::move(options), services)) {
    metrics.add_source([impl = impl_.get()](observe::MetricsWriter& out) { impl->context.request_metrics.write(out); });
}

void raise_descriptor_limit(std::size_t max_connections) {
    // Besides one per connection: blob files being sent or written, RocksDB's
    // tables, upstream and peer connections, the listener and the logs.
    constexpr rlim_t headroom = 256;
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) throw std::runtime_error("cannot read RLIMIT_NOFILE");
    const auto soft_before = limit.rlim_cur;
    rlim_t ceiling = limit.rlim_max;
    if (ceiling == RLIM_INFINITY) {
        // The kernel takes no more than fs.nr_open for RLIMIT_NOFILE.
        std::ifstream nr_open("/proc/sys/fs/nr_open");
        rlim_t most = 0;
        ceiling = nr_open >> most && most ? most : 1048576;
    }
    if (limit.rlim_cur < ceiling) {
        limit.rlim_cur = ceiling;
        if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) ::getrlimit(RLIMIT_NOFILE, &limit);
    }
    observe::log("info", "descriptor limit",
                 {{"soft_at_start", soft_before},
                  {"soft", limit.rlim_cur},
                  {"hard", limit.rlim_max == RLIM_INFINITY ? ceiling : limit.rlim_max},
                  {"max_connections", max_connections}});
    if (static_cast<rlim_t>(max_connections) + headroom > limit.rlim_cur)
        throw std::runtime_error(std::to_string(max_connections) + " connections plus " + std::to_string(headroom) +
                                 " descriptors of headroom exceed the descriptor limit of " +
                                 std::to_string(limit.rlim_cur) +
                                 " (RLIMIT_NOFILE hard limit): raise it (LimitNOFILE=, ulimit -Hn) or lower "
                                 "limits.max_connections");
}

Server::~Server() {
    impl_->stop_all();
    // An upload's last piece may still be stored, and what that finishes calls back into its
    // request (when_stored): drained first, while everything it touches is here.
    impl_->context.services.registry.drain_uploads();
    impl_->context.party_pools.stop();
    impl_->context.worker_pool.join();
}

void Server::bind() {
    auto& options = impl_->context.options;
    if (options.tls()) {
        impl_->reload_tls(true);
    }
    tcp::resolver resolver(impl_->io);
    tcp::endpoint endpoint = resolver.resolve(options.host, std::to_string(options.port)).begin()->endpoint();
    auto& acceptor = impl_->acceptor;
    acceptor.open(endpoint.protocol());
    acceptor.set_option(asio::socket_base::reuse_address(true));
    const auto refused = impl_->congestion.configure_listener(acceptor.native_handle(), options.same_host_congestion,
                                                              unmapped(endpoint.address()).is_loopback());
    if (!refused.empty())
        observe::log("warn", "same-host connections keep the system's congestion control", {{"error", refused}});
    acceptor.bind(endpoint);
    acceptor.listen(asio::socket_base::max_listen_connections);
}

std::uint16_t Server::port() const { return impl_->acceptor.local_endpoint().port(); }

void Server::reload_tls() { impl_->reload_tls(false); }

void Server::on_shutdown(std::function<void()> callback) { impl_->shutdown_callbacks.push_back(std::move(callback)); }

void Server::run() {
    auto& impl = *impl_;
    impl.signals.async_wait([&impl](boost::system::error_code ec, int) {
        if (!ec) impl.begin_shutdown();
    });
    impl.accept();
    observe::log("info", "listening", {{"address", impl.context.options.host}, {"port", port()}});

    std::vector<std::thread> pool;
    for (std::size_t i = 1; i < impl.ios.size(); ++i) pool.emplace_back([&impl, i] { run_guarded(*impl.ios[i]); });
    run_guarded(impl.io);
    for (auto& thread : pool) thread.join();
    impl.context.services.registry.drain_uploads();  // see ~Server
    impl.context.worker_pool.join();
    observe::log("info", "stopped");
}

void Server::stop() {
    asio::post(impl_->io, [this] { impl_->begin_shutdown(); });
}

}  // namespace berth::http
