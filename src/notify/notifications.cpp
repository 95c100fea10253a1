// Notifications (notifications.hpp): the endpoints' workers, and the round in which replicas tell
// each other how far each endpoint got.
#include "berth/notify/notifications.hpp"

#include <algorithm>
#include <thread>

#include <nlohmann/json.hpp>

#include "berth/observe/log.hpp"
#include "berth/oci/names.hpp"
#include "berth/replication/cluster.hpp"
#include "endpoint_worker.hpp"
#include "pull_tally.hpp"
#include "settled.hpp"

namespace berth::notify {
namespace {

constexpr std::size_t max_progress_answer = 1 << 20;
constexpr auto gossip_period = std::chrono::milliseconds(250);

}  // namespace

// The notifications' own paths on the peer protocol (beside replication/protocol.hpp's).
const char* const progress_target = "/_berth/v1/notifications/progress";

struct Notifications::Impl {
    Impl(Options o, storage::MetaStore& meta, storage::HybridClock& clock, replication::Cluster* cluster,
         std::function<std::string(const std::string&)> mirror_host, std::string replica)
        : replica(std::move(replica)), options(std::move(o)), shared{meta,           clock,
                                                                     cluster,        std::move(mirror_host),
                                                                     options.settle, options.base_images} {}

    EndpointWorker* find(const std::string& name) const {
        for (auto& worker : workers)
            if (worker->endpoint().name == name) return worker.get();
        return nullptr;
    }
    void gossip();
    void count_pulls();
    bool counts_pulls_of(const std::string& repo) const;

    std::string replica;
    Options options;
    bool wants_pulls = false;
    PullTally pulls;
    std::thread pull_thread;
    std::mutex pull_mutex;
    std::condition_variable pull_wake;
    bool tally_full = false;  // guarded by pull_mutex
    Shared shared;
    std::vector<std::unique_ptr<EndpointWorker>> workers;
    std::thread gossip_thread;
    std::mutex gossip_mutex;
    std::condition_variable gossip_wake;
};

// Four times a second, every peer's word on every endpoint, merged: the replica that takes over an
// endpoint starts from what its predecessor last told. A peer that does not answer is asked again.
void Notifications::Impl::gossip() {
    while (!shared.stopping) {
        for (auto& address : shared.cluster->peer_addresses()) {
            if (shared.stopping) break;
            try {
                auto answer =
                    shared.cluster->ask_peer(address, {"GET", progress_target, {}, {}, false, {}}, max_progress_answer);
                if (answer.status != 200) continue;
                for (auto& [name, progress] : parse_progress_map(answer.body))
                    if (auto* worker = find(name)) worker->merge(progress);
            } catch (const std::exception&) {
                // Unreachable now: its word comes at a later round, or another replica's does.
            }
        }
        shared.heard_peers = true;
        std::unique_lock lock(gossip_mutex);
        gossip_wake.wait_for(lock, gossip_period, [this] { return shared.stopping.load(); });
    }
}

// Every pull_interval, what this replica served, to each endpoint that asks for pulls; sooner when
// the tally filled up (many distinct digests), so that pulls after are counted too.
void Notifications::Impl::count_pulls() {
    while (!shared.stopping) {
        bool early = false;
        {
            std::unique_lock lock(pull_mutex);
            pull_wake.wait_for(lock, options.pull_interval, [this] { return shared.stopping || tally_full; });
            std::swap(early, tally_full);
        }
        auto counted = pulls.take(replica, wall_ms(), shared.mirror_host);
        for (auto& worker : workers)
            if (!counted.empty() && worker->endpoint().wants(Action::pull)) worker->add_pulls(counted);
        if (!early) continue;
        // Early takes at most once a second: a client filling the tally over and over costs a
        // bounded stream of events (endpoints drop, and count, what they cannot keep).
        std::unique_lock lock(pull_mutex);
        pull_wake.wait_for(lock, std::chrono::seconds(1), [this] { return shared.stopping.load(); });
    }
}

bool Notifications::Impl::counts_pulls_of(const std::string& repo) const {
    return std::any_of(workers.begin(), workers.end(), [&](auto& worker) {
        const auto& endpoint = worker->endpoint();
        return endpoint.wants(Action::pull) &&
               (endpoint.repositories.empty() || oci::matches_any(endpoint.repositories, repo));
    });
}

Notifications::Notifications(Options options, storage::MetaStore& meta, storage::HybridClock& clock,
                             std::filesystem::path dir, replication::Cluster* cluster,
                             std::function<std::string(const std::string&)> mirror_host, std::string replica)
    : impl_(std::make_unique<Impl>(std::move(options), meta, clock, cluster, std::move(mirror_host),
                                   std::move(replica))) {
    for (auto& endpoint : impl_->options.endpoints) {
        impl_->workers.push_back(std::make_unique<EndpointWorker>(endpoint, impl_->shared, dir));
        impl_->wants_pulls = impl_->wants_pulls || endpoint.wants(Action::pull);
    }
}

// Only what some endpoint hears of is counted: pulls elsewhere cannot fill the tally.
void Notifications::pulled(const std::string& repo, const std::string& digest) {
    if (!impl_->wants_pulls || !impl_->counts_pulls_of(repo)) return;
    if (impl_->pulls.add(repo, digest, wall_ms())) {
        std::lock_guard lock(impl_->pull_mutex);
        impl_->tally_full = true;
        impl_->pull_wake.notify_all();
    }
}

Notifications::~Notifications() { stop(); }

void Notifications::start() {
    if (impl_->shared.cluster) impl_->gossip_thread = std::thread([this] { impl_->gossip(); });
    else impl_->shared.heard_peers = true;
    for (auto& worker : impl_->workers) worker->start();
    if (impl_->wants_pulls) impl_->pull_thread = std::thread([this] { impl_->count_pulls(); });
}

void Notifications::stop() {
    impl_->shared.stopping = true;
    {
        std::lock_guard lock(impl_->gossip_mutex);
        impl_->gossip_wake.notify_all();
    }
    {
        std::lock_guard lock(impl_->pull_mutex);
        impl_->pull_wake.notify_all();
    }
    if (impl_->gossip_thread.joinable()) impl_->gossip_thread.join();
    if (impl_->pull_thread.joinable()) impl_->pull_thread.join();
    for (auto& worker : impl_->workers) worker->join();
}

const Options& Notifications::options() const { return impl_->options; }

std::vector<EndpointStatus> Notifications::status() const {
    std::vector<EndpointStatus> out;
    for (auto& worker : impl_->workers) out.push_back(worker->status());
    return out;
}

std::optional<std::vector<std::string>> Notifications::dead_letters(const std::string& name, std::size_t skip,
                                                                    std::size_t limit) const {
    auto* worker = impl_->find(name);
    if (!worker) return std::nullopt;
    return worker->dead_letters().list(skip, limit);
}

bool Notifications::replay(const std::string& name, std::uint64_t since_ms) {
    auto* worker = impl_->find(name);
    if (worker) worker->replay(since_ms);
    return worker != nullptr;
}

bool Notifications::enable(const std::string& name) {
    auto* worker = impl_->find(name);
    if (worker) worker->enable();
    return worker != nullptr;
}

std::string Notifications::progress_text() const {
    std::map<std::string, Progress> all;
    for (auto& worker : impl_->workers) all[worker->endpoint().name] = worker->progress();
    return encode_progress_map(all);
}

std::uint64_t Notifications::needed_from() const {
    std::uint64_t oldest = UINT64_MAX;
    for (auto& worker : impl_->workers) oldest = std::min(oldest, worker->scan() + 1);
    return oldest;
}

void Notifications::write_metrics(observe::MetricsWriter& out) const {
    using observe::Metric;
    if (impl_->wants_pulls) out.add(Metric::notify_pulls_uncounted_total, {}, double(impl_->pulls.dropped()));
    for (auto& worker : impl_->workers) {
        const auto s = worker->status();
        const observe::Labels endpoint = {{"endpoint", s.name}};
        out.add(Metric::notify_delivered_total, endpoint, double(s.delivered));
        out.add(Metric::notify_failed_total, endpoint, double(s.failed));
        out.add(Metric::notify_retried_total, endpoint, double(s.retried));
        out.add(Metric::notify_dead_lettered_total, endpoint, double(s.dead_lettered));
        if (impl_->wants_pulls) out.add(Metric::notify_pulls_dropped_total, endpoint, double(s.pulls_dropped));
        out.add(Metric::notify_lag_events, endpoint, double(s.lag_events));
        out.add(Metric::notify_lag_seconds, endpoint, s.lag_seconds);
        out.add(Metric::notify_disabled, endpoint, s.disabled ? 1 : 0);
        out.add(Metric::notify_delivering, endpoint, s.delivering ? 1 : 0);
    }
}

}  // namespace berth::notify
