// Following the other replicas: each peer's change log on a thread of its own,
// a bootstrap where the log cannot serve (bootstrap.cpp), and what the
// following says about this replica (readiness, status, metrics).
#include <thread>

#include "berth/net/resolve.hpp"
#include <nlohmann/json.hpp>

#include "berth/observe/log.hpp"
#include "berth/replication/protocol.hpp"
#include "berth/storage/meta_store.hpp"
#include "berth/storage/backup.hpp"
#include "replicator_impl.hpp"

namespace berth::replication {

using storage::Event;

bool Replicator::Impl::apply_entries(Peer& peer, const std::vector<std::pair<std::uint64_t, std::string>>& entries) {
    bool applied_all = true;
    for (auto& [sequence, text] : entries) {
        auto event = Event::parse(text);
        if (event && applier.apply(*event, sources(&peer)) == ApplyResult::unavailable) {
            applied_all = false;  // its content is out of reach for now: again from here later
            break;
        }
        std::lock_guard lock(mutex);  // status() reads the cursor
        peer.cursor = sequence;
        ++peer.applied;
    }
    meta.sync();
    save_cursor(peer);
    std::lock_guard lock(mutex);
    if (peer.target && peer.cursor >= *peer.target) peer.holds_readiness = false;
    peer.oldest_unapplied_ms =
        peer.cursor >= peer.head ? 0 : (peer.oldest_unapplied_ms ? peer.oldest_unapplied_ms : now_ms());
    return applied_all;
}

void Replicator::Impl::follow(Peer& peer) {
    const auto started_at = std::chrono::steady_clock::now();
    bool first_contact = true;
    while (!stopping) {
        try {
            if (!follow_page(peer, first_contact)) return;
        } catch (const std::exception& error) {
            note_unreachable(peer, error.what(), started_at);
            sleep_for(std::chrono::seconds(1));
        }
    }
}

bool Replicator::Impl::follow_page(Peer& peer, bool& first_contact) {
    const auto asked_after = peer.cursor;
    const auto asked_ms = now_ms();
    auto response = peer.client.request("GET", protocol::log_target(asked_after, 500), {}, std::chrono::seconds(3));
    const bool compacted = response.status == 410;
    if (response.status != 200 && !compacted)
        throw std::runtime_error("peer answered " + std::to_string(response.status) + " to /log");
    if (!check_protocol(peer, response.header(protocol::header::versions))) {
        sleep_for(std::chrono::seconds(5));
        return true;
    }
    const auto page = protocol::parse_log_page(response.body);
    if (page.replica == self_id) {
        std::lock_guard lock(mutex);
        peer.self = true;
        peer.holds_readiness = false;
        return false;
    }
    if (first_contact || peer.id != page.replica) {
        {
            std::lock_guard lock(mutex);  // status() and owner_of read it
            peer.id = page.replica;
        }
        load_cursor(peer);
        first_contact = false;
        // The answer is for the cursor before this replica knew whose it was.
        if (peer.cursor != asked_after) return true;
    }
    if (peer.epoch != page.epoch) {
        // A peer that lost its volume starts a new log: begin it again.
        {
            std::lock_guard lock(mutex);
            peer.epoch = page.epoch;
            peer.cursor = 0;
        }
        save_cursor(peer);
        return true;
    }
    note_contact(peer, page.head, page.filling);
    if (page.filling) {
        // An empty peer copying the others: nothing to wait for or take from it yet.
        {
            std::lock_guard lock(mutex);
            peer.heard_ms = asked_ms;
            peer.unreachable_since.reset();
        }
        sleep_for(std::chrono::seconds(1));
        return true;
    }
    // Empty here, or the peer compacted entries this replica has not
    // read: its state instead of its log. An unfinished bootstrap resumes.
    const bool resuming = !meta.setting(storage::layout::setting::bootstrap(peer.id)).value_or("").empty();
    if (resuming || compacted || (peer.cursor == 0 && page.head > 0)) {
        if (compacted && peer.cursor > 0) {
            observe::log("warning", "peer compacted its log past this replica's cursor; re-bootstrapping",
                         {{"peer", peer.client.address()}, {"cursor", peer.cursor}});
            std::lock_guard lock(mutex);
            peer.holds_readiness = true;  // stale until it has caught up again
            peer.target = page.head;
        }
        bootstrap(peer);
        return true;
    }
    const bool stalled = !apply_entries(peer, page.entries);
    if (!stalled && peer.cursor >= page.head) {
        std::lock_guard lock(mutex);
        peer.heard_ms = asked_ms;
        peer.unreachable_since.reset();
    }
    if (stalled) sleep_for(std::chrono::seconds(1));
    else if (peer.cursor >= page.head) sleep_for(options.poll_interval);
    return true;
}

void Replicator::Impl::note_contact(Peer& peer, std::uint64_t head, bool filling) {
    std::lock_guard lock(mutex);
    peer.reachable = true;
    peer.head = head;
    peer.last_contact_ms = now_ms();
    // A peer still filling holds nobody's readiness; one serving sets the target to catch up to.
    if (filling) peer.holds_readiness = false;
    else if (!peer.target) peer.target = head;
}

void Replicator::Impl::note_unreachable(Peer& peer, const std::string& error,
                                        std::chrono::steady_clock::time_point started_at) {
    constexpr auto startup_grace = std::chrono::seconds(10);
    std::lock_guard lock(mutex);
    // A peer still unreachable a while after start is not waited for: it may be down for good.
    // Before that, it may only be starting (its DNS name not yet published), and must not be skipped.
    if (!peer.target && std::chrono::steady_clock::now() - started_at > startup_grace) peer.holds_readiness = false;
    peer.reachable = false;
    if (!peer.unreachable_since) peer.unreachable_since = std::chrono::steady_clock::now();
    ++peer.errors;
    peer.last_error = error;
}

// A peer whose protocol this replica does not speak is not followed (its
// events could be misread) and keeps this replica unready until one of the
// two is upgraded: then a rolling upgrade stops at the first replica that cannot
// talk to the others instead of letting them diverge.
bool Replicator::Impl::check_protocol(Peer& peer, const std::string& header) {
    auto versions = protocol::parse_versions(header);
    std::string problem;
    if (!versions) problem = "peer sent malformed protocol versions '" + header + "'";
    else if (!protocol::compatible(*versions)) problem = protocol::incompatibility(*versions);
    std::lock_guard lock(mutex);
    if (problem != peer.incompatible && !problem.empty())
        observe::log("error", "peer speaks an incompatible protocol; not following it",
                     {{"peer", peer.client.address()}, {"reason", problem}});
    peer.incompatible = problem;
    peer.reachable = true;
    return problem.empty();
}

void Replicator::Impl::resolve_dns() {
    const auto name = net::parse_host_port(options.peer_dns, "5000");
    while (!stopping) {
        for (auto& address : net::resolve(name)) {
            std::lock_guard lock(mutex);
            dns_answered = true;
            if (auto* peer = add_peer(address.str())) peer->thread = std::thread([this, peer] { follow(*peer); });
        }
        sleep_for(std::chrono::seconds(15));
    }
}

void Replicator::start() {
    std::lock_guard lock(impl_->mutex);
    impl_->started = true;
    for (auto& peer : impl_->peers)
        if (!peer->self) peer->thread = std::thread([this, p = peer.get()] { impl_->follow(*p); });
    if (!impl_->options.peer_dns.empty()) impl_->discovery = std::thread([this] { impl_->resolve_dns(); });
    impl_->statuses = std::thread([this] { impl_->poll_statuses(); });
}

void Replicator::stop() {
    {
        std::lock_guard lock(impl_->mutex);
        impl_->stopping = true;
    }
    impl_->wake.notify_all();
    if (impl_->discovery.joinable()) impl_->discovery.join();
    if (impl_->statuses.joinable()) impl_->statuses.join();
    std::vector<std::thread*> threads;
    {
        std::lock_guard lock(impl_->mutex);
        for (auto& peer : impl_->peers) threads.push_back(&peer->thread);
    }
    for (auto* thread : threads)
        if (thread->joinable()) thread->join();
    while (impl_->pushes_in_flight > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

bool Replicator::ready() const {
    std::lock_guard lock(impl_->mutex);
    return impl_->ready_locked();
}

std::string Replicator::incompatible_peers() const {
    std::lock_guard lock(impl_->mutex);
    std::string out;
    for (auto& peer : impl_->peers)
        if (!peer->incompatible.empty())
            out += (out.empty() ? "" : "; ") + peer->client.address() + ": " + peer->incompatible;
    return out;
}

std::string Replicator::status_json() const { return protocol::encode_status(status()); }

// Every peer is asked at once, without a thread waiting on any: one that hangs is answered by its
// deadline, and reported as not answering until it answers again.
void Replicator::Impl::poll_statuses() {
    constexpr auto period = std::chrono::seconds(2);
    constexpr auto deadline = std::chrono::milliseconds(1500);
    while (!stopping) {
        std::vector<Peer*> asked;
        {
            std::lock_guard lock(mutex);
            for (auto& peer : peers)
                if (!peer->self) asked.push_back(peer.get());
        }
        for (auto* peer : asked) {
            ++pushes_in_flight;  // stop() waits for these answers as for a quorum's
            peer->client.async_request(
                "GET", protocol::status_target(), {}, deadline, {},
                [this, peer](std::exception_ptr failure, net::Response answer) {
                    std::string error;
                    try {
                        if (failure) std::rethrow_exception(failure);
                    } catch (const std::exception& e) {
                        error = e.what();
                    }
                    auto status = !failure && answer.status == 200 ? protocol::parse_status(answer.body) : std::nullopt;
                    if (!failure && !status)
                        error = answer.status == 200 ? "its status is not one"
                                                     : "its status answered " + std::to_string(answer.status);
                    {
                        std::lock_guard lock(mutex);
                        peer->status = std::move(status);
                        peer->status_versions = failure ? std::string() : answer.header(protocol::header::versions);
                        peer->status_error = std::move(error);
                    }
                    --pushes_in_flight;
                });
        }
        sleep_for(period);
    }
}

ClusterView Replicator::cluster_view() const {
    ClusterView view{status(), {}};
    std::lock_guard lock(impl_->mutex);
    for (auto& peer : impl_->peers)
        if (!peer->self)
            view.peers.push_back(
                {peer->client.address(), peer->id, peer->status, peer->status_versions, peer->status_error});
    return view;
}

protocol::Status Replicator::status() const {
    std::optional<protocol::LastBackup> last_backup;
    if (impl_->backups) {
        auto backup = impl_->backups->status();
        last_backup = protocol::LastBackup{backup.id, backup.finished, backup.error};
    }
    std::lock_guard lock(impl_->mutex);
    protocol::Status status{impl_->self_id,
                            impl_->epoch,
                            impl_->meta.log_head(),
                            impl_->ready_locked(),
                            impl_->applier.bytes_fetched(),
                            {},
                            std::move(last_backup)};
    for (auto& p : impl_->peers) {
        if (p->self) continue;
        status.peers.push_back({p->client.address(), p->id, p->reachable, !p->holds_readiness, p->cursor, p->head,
                                p->applied, p->errors,
                                p->oldest_unapplied_ms ? (now_ms() - p->oldest_unapplied_ms) / 1000.0 : 0.0,
                                p->last_error, p->incompatible, p->bootstrap_part, p->bootstrap_records});
    }
    return status;
}

void Replicator::write_metrics(observe::MetricsWriter& out) const {
    using observe::Metric;
    std::lock_guard lock(impl_->mutex);
    for (auto& p : impl_->peers) {
        if (p->self) continue;
        const auto address = p->client.address();
        const observe::Labels peer = {{"peer", address}};
        out.add(Metric::replication_lag_events, peer,
                static_cast<double>(p->head > p->cursor ? p->head - p->cursor : 0));
        out.add(Metric::replication_lag_seconds, peer,
                p->oldest_unapplied_ms ? static_cast<double>(now_ms() - p->oldest_unapplied_ms) / 1000.0 : 0.0);
        out.add(Metric::replication_errors_total, peer, static_cast<double>(p->errors));
        out.add(Metric::replication_peer_up, peer, p->reachable ? 1 : 0);
        out.add(Metric::replication_peer_compatible, peer, p->incompatible.empty() ? 1 : 0);
    }
    out.add(Metric::replication_fetched_bytes_total, static_cast<double>(impl_->applier.bytes_fetched()));
}

}  // namespace berth::replication
