#include "proxy_impl.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "berth/observe/log.hpp"
#include "berth/replication/protocol.hpp"
#include "berth/replication/cluster.hpp"

namespace berth::proxy {
namespace {

net::ClientOptions upstream_client_options(const Options& proxy) {
    net::ClientOptions options;
    // A body that stops for longer than the shortest deadline fails at once,
    // not when a read of it would have timed out.
    for (auto& upstream : proxy.upstreams)
        options.idle_timeout = std::clamp<std::chrono::milliseconds>(upstream.fetch_timeout, std::chrono::seconds(1),
                                                                     options.idle_timeout);
    // Shorter than the second a miss may take while the upstream is away, so
    // containerd can still fall back to its next host in time.
    options.connect_timeout = std::chrono::milliseconds(900);
    options.io_threads = 2;
    return options;
}

remote::Config remote_config(const Upstream& upstream) {
    remote::Config config;
    for (auto& url : upstream.urls) config.urls.push_back(net::parse_url(url));
    config.tls.ca_file = upstream.ca_file;
    config.tls.insecure = upstream.insecure;
    config.tls.cert_file = upstream.cert_file;
    config.tls.key_file = upstream.key_file;
    config.username = upstream.username;
    config.password = upstream.password;
    config.max_concurrent = upstream.max_concurrent;
    config.fetch_timeout = upstream.fetch_timeout;
    config.token_realms = upstream.token_realms;
    config.address_book = upstream.address_book;
    return config;
}

std::set<std::string> kept_repositories(const Options& options) {
    std::set<std::string> out;
    for (auto& image : options.keep_images) out.insert(image.repository);
    return out;
}

}  // namespace

Proxy::Impl::Impl(Options o, Limits l, storage::BlobStore& b, storage::MetaStore& m, const replication::Cluster* r)
    : options(std::move(o)), limits(l), client(upstream_client_options(options)), blobs(b), meta(m), cluster(r) {
    for (auto& upstream : options.upstreams)
        upstreams.push_back(std::make_unique<UpstreamState>(client, upstream, remote_config(upstream)));
    if (options.agent && options.agent_authorize == Options::Authorize::caller)
        gate = std::make_unique<AgentGate>(client, remote_config(options.upstreams.front()),
                                           AgentGate::DecisionTtl{options.agent_decision_ttl, options.agent_outage_ttl},
                                           kept_repositories(options));
    if (options.agent && options.peers) peers = std::make_unique<AgentPeers>(*options.peers, options.upstreams.front());
}

std::optional<std::pair<std::size_t, std::string>> mirrored_name(const Options& options, const std::string& repo) {
    for (std::size_t i = 0; i < options.upstreams.size(); ++i) {
        const auto& host = options.upstreams[i].host;
        if (host.empty()) return std::pair{i, repo};
        if (repo.size() > host.size() + 1 && repo.starts_with(host) && repo[host.size()] == '/')
            return std::pair{i, repo.substr(host.size() + 1)};
    }
    return std::nullopt;
}

std::pair<UpstreamState*, std::string> Proxy::Impl::find(const std::string& repo) const {
    auto found = mirrored_name(options, repo);
    if (!found) return {nullptr, {}};
    return {upstreams[found->first].get(), std::move(found->second)};
}

net::RequestHead Proxy::Impl::owner_request(const std::string& path, const net::Headers& extra) const {
    // Berth-Forwarded: the owner fetches itself rather than delegate again.
    net::Headers headers{{replication::protocol::header::forwarded, "1"}};
    headers.insert(headers.end(), extra.begin(), extra.end());
    std::chrono::seconds timeout{30};
    for (auto& upstream : options.upstreams) timeout = std::max(timeout, upstream.fetch_timeout);
    return {"GET", path, std::move(headers), std::nullopt, false, timeout};
}

namespace {
std::uint64_t now_ms() {
    using namespace std::chrono;
    return static_cast<std::uint64_t>(duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count());
}
}  // namespace

void UpstreamState::answered(int status) {
    if (status >= 500 || status == 429) failed("answered " + std::to_string(status));
    else answered_ms = now_ms();
}

void UpstreamState::failed(const std::string& why) {
    std::lock_guard lock(error_mutex);
    last_error = why;
    failed_ms = now_ms();
}

void Proxy::Impl::log_failure(UpstreamState& upstream, const std::string& what, const std::string& why) {
    ++upstream.counters.errors;
    upstream.failed(why);
    observe::log("warn", "upstream fetch failed",
                 {{"upstream", upstream.options.host.empty() ? "replicas" : upstream.options.host},
                  {"what", what},
                  {"error", why}});
}

Proxy::Proxy(Options options, Limits limits, storage::BlobStore& blobs, storage::MetaStore& meta,
             const replication::Cluster* cluster)
    : impl_(std::make_unique<Impl>(std::move(options), limits, blobs, meta, cluster)) {}

// Fetch threads use the client and the store: they end first.
Proxy::~Proxy() { finish_fetches(); }

auth::DelegatedAccess* Proxy::agent_access() { return impl_->gate.get(); }

bool Proxy::mirrors(const std::string& repo) const { return impl_->find(repo).first != nullptr; }

std::string Proxy::default_host() const {
    if (impl_->upstreams.size() == 1) return impl_->upstreams.front()->options.host;
    for (auto& upstream : impl_->upstreams)
        if (upstream->options.host == "docker.io") return upstream->options.host;
    return {};
}

void Proxy::count(const std::string& repo, registry::Cache cache) {
    auto [upstream, name] = impl_->find(repo);
    if (!upstream) return;
    if (cache == registry::Cache::hit) ++upstream->counters.hits;
    if (cache == registry::Cache::stale) ++upstream->counters.stale;
}

void Proxy::touched(const oci::Digest& digest) {
    if (!impl_->options.cache_max_bytes) return;
    std::lock_guard lock(impl_->used_mutex);
    impl_->last_used[digest.str()] = Clock::now();
}

net::Response Proxy::ask_replicas(const std::string& path, std::size_t limit) {
    auto& replicas = *impl_->upstreams.front();
    remote::RegistryClient::Slot slot(replicas.remote, replicas.remote.deadline());
    return replicas.remote.request("GET", path, "", limit);
}

std::size_t Proxy::fetches_in_flight() const {
    std::lock_guard lock(impl_->flights_mutex);
    return impl_->running;
}

void Proxy::announce_agent() {
    if (impl_->peers) impl_->peers->announce(impl_->upstreams.front()->remote);
}

std::size_t Proxy::trim_cache(const std::unordered_set<std::string>& kept) {
    const auto budget = impl_->options.cache_max_bytes;
    if (!budget) return 0;
    struct Entry {
        oci::Digest digest;
        std::uint64_t size;
        std::int64_t used;  // seconds, comparable across both sources
    };
    std::vector<Entry> entries;
    std::uint64_t total = 0;
    {
        std::lock_guard lock(impl_->used_mutex);
        const auto now_steady = Clock::now();
        const auto now_wall = std::chrono::system_clock::now();
        impl_->blobs.for_each([&](const oci::Digest& digest, std::uint64_t size, std::int64_t mtime) {
            if (kept.count(digest.str())) return;  // the node needs it to start the cluster
            std::int64_t used = mtime;
            if (auto it = impl_->last_used.find(digest.str()); it != impl_->last_used.end())
                used = std::chrono::duration_cast<std::chrono::seconds>(
                           (now_wall - (now_steady - it->second)).time_since_epoch())
                           .count();
            entries.push_back({digest, size, used});
            total += size;
        });
    }
    if (total <= budget) return 0;
    std::sort(entries.begin(), entries.end(), [](auto& a, auto& b) { return a.used < b.used; });
    std::size_t evicted = 0;
    for (auto& entry : entries) {
        if (total <= budget) break;
        // Readers keep their open files; the next read of it fetches it again.
        if (impl_->blobs.remove(entry.digest)) {
            total -= entry.size;
            ++evicted;
            std::lock_guard lock(impl_->used_mutex);
            impl_->last_used.erase(entry.digest.str());
        }
    }
    return evicted;
}

std::vector<registry::MirrorStatus> Proxy::mirror_status() const {
    std::vector<registry::MirrorStatus> out;
    for (auto& upstream : impl_->upstreams) {
        const auto& c = upstream->counters;
        registry::MirrorStatus status{upstream->options.host,
                                      upstream->options.urls,
                                      c.hits,
                                      c.misses,
                                      c.stale,
                                      c.fetched_bytes,
                                      c.errors,
                                      std::nullopt,
                                      {}};
        const auto answered = upstream->answered_ms.load(), failed = upstream->failed_ms.load();
        if (answered || failed) status.reachable = answered >= failed;
        if (failed) {
            std::lock_guard lock(upstream->error_mutex);
            status.last_error = upstream->last_error;
        }
        out.push_back(std::move(status));
    }
    return out;
}

void Proxy::write_metrics(observe::MetricsWriter& out) const {
    using observe::Metric;
    for (auto& upstream : impl_->upstreams) {
        const auto& c = upstream->counters;
        const std::string name = upstream->options.host.empty() ? "replicas" : upstream->options.host;
        const observe::Labels labels = {{"upstream", name}};
        out.add(Metric::proxy_hits_total, labels, static_cast<double>(c.hits.load()));
        out.add(Metric::proxy_misses_total, labels, static_cast<double>(c.misses.load()));
        out.add(Metric::proxy_stale_total, labels, static_cast<double>(c.stale.load()));
        out.add(Metric::proxy_fetched_bytes_total, labels, static_cast<double>(c.fetched_bytes.load()));
        out.add(Metric::proxy_coalesced_total, labels, static_cast<double>(c.coalesced.load()));
        out.add(Metric::proxy_upstream_errors_total, labels, static_cast<double>(c.errors.load()));
        out.add_summary(Metric::proxy_upstream_seconds, labels, static_cast<double>(c.request_micros.load()) * 1e-6,
                        c.requests.load());
        if (impl_->options.agent) {
            out.add(Metric::agent_remembered_replicas_total, static_cast<double>(upstream->remote.remembered()));
            out.add(Metric::agent_blob_bytes_total, {{"source", "replicas"}},
                    static_cast<double>(c.fetched_bytes.load()));
        }
    }
    if (impl_->peers) impl_->peers->write_metrics(out);
    if (impl_->gate) impl_->gate->write_metrics(out);
}

}  // namespace berth::proxy
