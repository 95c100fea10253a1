#include "core.hpp"

#include <boost/asio/post.hpp>

#include <filesystem>

namespace berth::net {

Core::Core(ClientOptions options)
    : options(std::move(options)), io(static_cast<int>(std::max(1u, this->options.io_threads))),
      sweep_strand_(asio::make_strand(io)), sweep_timer_(sweep_strand_), work_(asio::make_work_guard(io)) {}

Core::~Core() = default;

std::string Core::pool_key(const Origin& origin) {
    std::string key = origin.address.str();
    if (origin.tls.enabled) {
        const auto& tls = origin.tls;
        key = "https|" + key + '|' + tls.server_name + '|' + (tls.insecure ? "insecure" : tls.ca_file) + '|' +
              tls.cert_file + '|' + tls.key_file;
    }
    return key;
}

namespace {

// When the files were last written: a changed certificate (cert-manager
// renewing it) makes new connections load it again, without a restart.
std::string files_version(const TlsOptions& tls) {
    std::string version;
    for (auto* file : {&tls.ca_file, &tls.cert_file, &tls.key_file}) {
        std::error_code ec;
        if (!file->empty())
            version += std::to_string(std::filesystem::last_write_time(*file, ec).time_since_epoch().count()) + '|';
    }
    return version;
}

}  // namespace

std::shared_ptr<asio::ssl::context> Core::tls_context(const Origin& origin) {
    const auto& tls = origin.tls;
    const auto key = (tls.insecure ? "insecure" : tls.ca_file) + '|' + tls.cert_file + '|' + tls.key_file;
    auto version = files_version(tls);
    auto& entry = tls_contexts_[key];
    if (!entry.context || entry.version != version) entry = {make_tls_context(tls), std::move(version)};
    return entry.context;
}

std::shared_ptr<Connection> Core::take(const Origin& origin, bool fresh) {
    const auto key = pool_key(origin);
    std::vector<std::shared_ptr<Connection>> discarded;
    std::shared_ptr<Connection> connection;
    {
        std::lock_guard lock(mutex_);
        if (shutting_down_) throw Error(Error::Kind::closed, "the HTTP client is shutting down");
        if (auto pool = fresh ? idle_.end() : idle_.find(key); pool != idle_.end()) {
            const auto oldest = std::chrono::steady_clock::now() - options.pool_idle;
            auto& idle = pool->second;
            while (!connection && !idle.empty()) {
                auto entry = std::move(idle.back());
                idle.pop_back();
                if (entry.since > oldest && !entry.connection->stale()) connection = std::move(entry.connection);
                else discarded.push_back(std::move(entry.connection));
            }
            if (idle.empty()) idle_.erase(pool);
        }
        if (connection) {
            connection->mark_reused();
        } else {
            connection = std::make_shared<Connection>(io, origin.tls.enabled ? tls_context(origin) : nullptr, key);
            live_.push_back(connection);
            if (live_.size() > live_pruned_at_) {
                std::erase_if(live_, [](const auto& weak) { return weak.expired(); });
                live_pruned_at_ = std::max<std::size_t>(16, 2 * live_.size());
            }
        }
    }
    for (auto& stale : discarded) close_later(stale);
    return connection;
}

void Core::give_back(std::shared_ptr<Connection> connection) {
    std::shared_ptr<Connection> evicted;
    {
        std::lock_guard lock(mutex_);
        if (shutting_down_ || options.max_idle_per_origin == 0) {
            evicted = std::move(connection);
        } else {
            connection->tcp().expires_never();
            auto& idle = idle_[connection->pool_key()];
            idle.push_back({std::move(connection), std::chrono::steady_clock::now()});
            if (idle.size() > options.max_idle_per_origin) {
                evicted = std::move(idle.front().connection);
                idle.pop_front();
            }
            arm_sweep();
        }
    }
    if (evicted) close_later(evicted);
}

void Core::arm_sweep() {
    if (sweep_armed_ || idle_.empty()) return;
    auto first = std::chrono::steady_clock::time_point::max();
    for (auto& [key, idle] : idle_) first = std::min(first, idle.front().since);
    sweep_armed_ = true;
    asio::post(sweep_strand_, [this, at = first + options.pool_idle] {
        sweep_timer_.expires_at(at);
        // The Client keeps the Core alive while its I/O threads run handlers.
        sweep_timer_.async_wait([this](boost::system::error_code ec) {
            if (!ec) sweep();
        });
    });
}

void Core::sweep() {
    std::vector<std::shared_ptr<Connection>> expired;
    {
        std::lock_guard lock(mutex_);
        sweep_armed_ = false;
        if (shutting_down_) return;
        const auto oldest = std::chrono::steady_clock::now() - options.pool_idle;
        for (auto pool = idle_.begin(); pool != idle_.end();) {
            auto& idle = pool->second;
            while (!idle.empty() && idle.front().since <= oldest) {
                expired.push_back(std::move(idle.front().connection));
                idle.pop_front();
            }
            pool = idle.empty() ? idle_.erase(pool) : std::next(pool);
        }
        arm_sweep();
    }
    for (auto& connection : expired) close_later(connection);
}

void Core::close_later(const std::shared_ptr<Connection>& connection) {
    asio::post(connection->strand(), [connection] { connection->close(); });
}

void Core::shut_down() {
    std::vector<std::shared_ptr<Connection>> open;
    {
        std::lock_guard lock(mutex_);
        shutting_down_ = true;
        for (auto& weak : live_)
            if (auto connection = weak.lock()) open.push_back(std::move(connection));
        live_.clear();
        idle_.clear();
    }
    for (auto& connection : open) close_later(connection);
    asio::post(sweep_strand_, [this] { sweep_timer_.cancel(); });
    work_.reset();
}

}  // namespace berth::net
