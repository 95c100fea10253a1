#include "berth/replication/replicator.hpp"

#include "berth/oci/json.hpp"
#include "berth/registry/reach.hpp"

#include <openssl/crypto.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "applier.hpp"
#include "berth/net/resolve.hpp"
#include "berth/oci/error.hpp"
#include "berth/observe/log.hpp"
#include "berth/replication/protocol.hpp"
#include "berth/storage/blob_store.hpp"
#include "berth/storage/hybrid_clock.hpp"
#include "berth/storage/meta_store.hpp"
#include "peer_client.hpp"
#include "replicator_impl.hpp"

namespace berth::replication {

using nlohmann::json;
using storage::Event;

std::uint64_t now_ms() {
    using namespace std::chrono;
    return static_cast<std::uint64_t>(duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count());
}

bool Replicator::Impl::apply_entries(Peer& peer, const std::vector<std::pair<std::uint64_t, std::string>>& entries) {
    bool applied_all = true;
    for (auto& [sequence, text] : entries) {
        auto event = Event::parse(text);
        if (event && applier.apply(*event, sources(&peer)) == ApplyResult::unavailable) {
            applied_all = false;  // its content is out of reach for now: again from here later
            break;
        }
        peer.cursor = sequence;
        std::lock_guard lock(mutex);
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
    constexpr auto startup_grace = std::chrono::seconds(10);
    const auto started_at = std::chrono::steady_clock::now();
    bool first_contact = true;
    while (!stopping) {
        try {
            const auto asked_after = peer.cursor;
            auto response =
                peer.client.request("GET", protocol::log_target(asked_after, 500), {}, std::chrono::seconds(3));
            const bool compacted = response.status == 410;
            if (response.status != 200 && !compacted)
                throw std::runtime_error("peer answered " + std::to_string(response.status) + " to /log");
            if (!check_protocol(peer, response.header(protocol::header::versions))) {
                sleep_for(std::chrono::seconds(5));
                continue;
            }
            const auto page = protocol::parse_log_page(response.body);
            const auto& id = page.replica;
            const auto& peer_epoch = page.epoch;
            const auto head = page.head;
            if (id == self_id) {
                std::lock_guard lock(mutex);
                peer.self = true;
                peer.holds_readiness = false;
                return;
            }
            if (first_contact || peer.id != id) {
                peer.id = id;
                load_cursor(peer);
                first_contact = false;
                // The answer is for the cursor before this replica knew whose it was.
                if (peer.cursor != asked_after) continue;
            }
            if (peer.epoch != peer_epoch) {
                // A peer that lost its volume starts a new log: begin it again.
                peer.epoch = peer_epoch;
                peer.cursor = 0;
                save_cursor(peer);
                continue;
            }
            if (page.filling) {
                // An empty peer copying the others: nothing to wait for or take from it yet.
                {
                    std::lock_guard lock(mutex);
                    peer.reachable = true;
                    peer.holds_readiness = false;
                    peer.head = head;
                    peer.last_contact_ms = now_ms();
                }
                sleep_for(std::chrono::seconds(1));
                continue;
            }
            {
                std::lock_guard lock(mutex);
                peer.reachable = true;
                peer.head = head;
                peer.last_contact_ms = now_ms();
                if (!peer.target) peer.target = head;
            }
            // Empty here, or the peer compacted entries this replica has not
            // read: its state instead of its log. An unfinished bootstrap resumes.
            const bool resuming = !meta.setting(storage::layout::setting::bootstrap(peer.id)).value_or("").empty();
            if (resuming || compacted || (peer.cursor == 0 && head > 0)) {
                if (compacted && peer.cursor > 0) {
                    observe::log("warning", "peer compacted its log past this replica's cursor; re-bootstrapping",
                                 {{"peer", peer.client.address()}, {"cursor", peer.cursor}});
                    std::lock_guard lock(mutex);
                    peer.holds_readiness = true;  // stale until it has caught up again
                    peer.target = head;
                }
                bootstrap(peer);
                continue;
            }
            const bool stalled = !apply_entries(peer, page.entries);
            if (stalled) sleep_for(std::chrono::seconds(1));
            else if (peer.cursor >= head) sleep_for(options.poll_interval);
        } catch (const std::exception& error) {
            {
                std::lock_guard lock(mutex);
                // A peer still unreachable a while after start is not waited for:
                // it may be down for good. Before that, it may only be starting
                // (its DNS name not yet published), and must not be skipped.
                if (!peer.target && std::chrono::steady_clock::now() - started_at > startup_grace)
                    peer.holds_readiness = false;
                peer.reachable = false;
                ++peer.errors;
                peer.last_error = error.what();
            }
            sleep_for(std::chrono::seconds(1));
        }
    }
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
            if (auto* peer = add_peer(address.str())) peer->thread = std::thread([this, peer] { follow(*peer); });
        }
        sleep_for(std::chrono::seconds(15));
    }
}

Replicator::Replicator(Options options, std::string self_id, storage::BlobStore& blobs, storage::MetaStore& meta,
                       storage::HybridClock& clock)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(self_id), blobs, meta, clock)) {}

Replicator::~Replicator() { stop(); }

void Replicator::start() {
    std::lock_guard lock(impl_->mutex);
    impl_->started = true;
    for (auto& peer : impl_->peers)
        if (!peer->self) peer->thread = std::thread([this, p = peer.get()] { impl_->follow(*p); });
    if (!impl_->options.peer_dns.empty()) impl_->discovery = std::thread([this] { impl_->resolve_dns(); });
}

void Replicator::stop() {
    {
        std::lock_guard lock(impl_->mutex);
        impl_->stopping = true;
    }
    impl_->wake.notify_all();
    if (impl_->discovery.joinable()) impl_->discovery.join();
    std::vector<std::thread*> threads;
    {
        std::lock_guard lock(impl_->mutex);
        for (auto& peer : impl_->peers) threads.push_back(&peer->thread);
    }
    for (auto* thread : threads)
        if (thread->joinable()) thread->join();
    while (impl_->pushes_in_flight > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

const std::string& Replicator::self_id() const { return impl_->self_id; }
const std::string& Replicator::secret() const { return impl_->options.secret; }

bool Replicator::authorized(std::string_view secret) const {
    const auto& expected = impl_->options.secret;
    return !expected.empty() && secret.size() == expected.size() &&
           CRYPTO_memcmp(secret.data(), expected.data(), expected.size()) == 0;
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

namespace {

// FNV-1a: the same on every replica and build, unlike std::hash.
std::uint64_t rendezvous_score(std::string_view replica, std::string_view key) {
    std::uint64_t h = 14695981039346656037ull;
    auto mix = [&](std::string_view text) {
        for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
    };
    mix(replica);
    mix(std::string_view("\0", 1));
    mix(key);
    h ^= h >> 33;  // FNV's low bits alone spread poorly across few replicas
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

}  // namespace

void Replicator::set_mirrors(const registry::Upstreams* mirrors) { impl_->applier.set_mirrors(mirrors); }
void Replicator::set_sparse(std::vector<std::string> globs) { impl_->applier.set_sparse(std::move(globs)); }

std::optional<std::string> Replicator::owner_of(std::string_view key) const {
    std::lock_guard lock(impl_->mutex);
    auto best = rendezvous_score(impl_->self_id, key);
    std::optional<std::string> owner;
    for (auto& peer : impl_->peers) {
        if (peer->self || !peer->reachable || peer->id.empty() || !peer->incompatible.empty()) continue;
        if (auto score = rendezvous_score(peer->id, key); score > best) {
            best = score;
            owner = peer->client.address();
        }
    }
    return owner;
}

net::Origin Replicator::peer_origin(const std::string& address) const {
    return {net::parse_host_port(address), impl_->options.tls};
}

std::optional<std::string> Replicator::address_of(const std::string& replica_id) const {
    std::lock_guard lock(impl_->mutex);
    for (auto& peer : impl_->peers)
        if (!peer->self && peer->id == replica_id) return peer->client.address();
    return std::nullopt;
}

std::string Replicator::status_json() const {
    std::lock_guard lock(impl_->mutex);
    json peers = json::array();
    for (auto& p : impl_->peers) {
        if (p->self) continue;
        peers.push_back({{"address", p->client.address()},
                         {"id", p->id},
                         {"reachable", p->reachable},
                         {"caught_up", !p->holds_readiness},
                         {"cursor", p->cursor},
                         {"head", p->head},
                         {"lag_events", p->head > p->cursor ? p->head - p->cursor : 0},
                         {"lag_seconds", p->oldest_unapplied_ms ? (now_ms() - p->oldest_unapplied_ms) / 1000.0 : 0.0},
                         {"applied", p->applied},
                         {"errors", p->errors},
                         {"last_error", p->last_error},
                         {"incompatible", p->incompatible}});
        if (!p->bootstrap_part.empty())
            peers.back()["bootstrap"] = {{"part", p->bootstrap_part}, {"records", p->bootstrap_records}};
    }
    const bool ready = impl_->ready_locked();
    return json{{"replica", impl_->self_id},
                {"epoch", impl_->epoch},
                {"log_head", impl_->meta.log_head()},
                {"ready", ready},
                {"bytes_fetched", impl_->applier.bytes_fetched()},
                {"peers", peers}}
        .dump();
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

void Replicator::apply_pushed(const std::string& origin, const protocol::ApplyRequest& pushed) {
    Peer* source = nullptr;
    {
        std::lock_guard lock(impl_->mutex);
        for (auto& peer : impl_->peers)
            if (peer->id == origin) source = peer.get();
    }
    auto src = impl_->sources(source);
    for (auto& event : pushed.events) {
        std::optional<ManifestContent> content;
        for (auto& m : pushed.manifests)
            if (event.type == Event::Type::manifest && m.repo == event.repo && m.digest == event.digest)
                content = ManifestContent{m.media_type, m.bytes};
        if (impl_->applier.apply(event, src, std::move(content)) == ApplyResult::unavailable)
            throw oci::Error(oci::ErrorCode::unavailable, "content for a replicated write could not be fetched");
    }
    impl_->meta.sync();  // one fsync for the lot, before the writer counts this replica
}

registry::Lookup Replicator::fetch_blob(const std::string& repo, const oci::Digest& digest) {
    registry::reach(registry::peers_party);
    bool all_answered = true;
    for (auto* source : impl_->sources(nullptr)) {
        try {
            auto response =
                source->request("GET", protocol::record_target(repo, protocol::RecordKind::link, digest.str()), {},
                                std::chrono::seconds(2));
            if (response.status == 404) continue;
            if (response.status != 200) {
                all_answered = false;
                continue;
            }
            auto doc = oci::parse_json_or_throw(response.body, "a peer's answer");
            Event event{Event::Type::link, repo, digest.str(), {}, protocol::stamp_of(doc)};
            std::vector<PeerClient*> sources{source};
            // The content first: the link may be here already, its file lost.
            auto content = impl_->applier.ensure_blob(digest, sources);
            if (content == ApplyResult::gone) continue;
            if (content == ApplyResult::unavailable) {
                all_answered = false;
                continue;
            }
            impl_->applier.apply(event, sources);
            impl_->meta.sync();
            if (impl_->meta.has_link(repo, digest.str())) return registry::Lookup::here;
        } catch (const std::exception&) {
            all_answered = false;
        }
    }
    return all_answered ? registry::Lookup::absent : registry::Lookup::unknown;
}

bool Replicator::fetch_manifest(const std::string& repo, const std::string& reference) {
    registry::reach(registry::peers_party);
    const bool by_digest = reference.find(':') != std::string::npos;
    for (auto* source : impl_->sources(nullptr)) {
        try {
            auto response = source->request(
                "GET",
                protocol::record_target(repo, by_digest ? protocol::RecordKind::manifest : protocol::RecordKind::tag,
                                        reference),
                {}, std::chrono::seconds(2));
            if (response.status != 200) continue;
            auto doc = oci::parse_json_or_throw(response.body, "a peer's answer");
            auto stamp = protocol::stamp_of(doc);
            std::vector<PeerClient*> sources{source};
            if (by_digest) impl_->applier.apply_manifest(repo, reference, stamp, std::nullopt, sources);
            else impl_->applier.apply({Event::Type::tag, repo, doc.at("digest"), reference, stamp}, sources);
            impl_->meta.sync();
            return true;
        } catch (const std::exception&) {}
    }
    return false;
}

void Replicator::replicate(const std::vector<Event>& events) {
    if (impl_->options.write_quorum == WriteQuorum::local || events.empty()) return;
    std::vector<Peer*> targets;
    {
        std::lock_guard lock(impl_->mutex);
        for (auto& peer : impl_->peers)
            if (!peer->self) targets.push_back(peer.get());
    }
    const std::size_t replicas = targets.size() + 1;
    const std::size_t needed = impl_->options.write_quorum == WriteQuorum::all ? replicas : replicas / 2 + 1;
    // The manifests travel with their events: the peer need not ask for them back.
    protocol::ApplyRequest request{events, {}};
    for (auto& event : events)
        if (event.type == Event::Type::manifest)
            if (auto record = impl_->meta.manifest(event.repo, event.digest); record && !record->deleted)
                request.manifests.push_back({event.repo, event.digest, record->media_type, std::move(record->bytes)});
    const auto text = protocol::encode_apply(request);

    struct Tally {
        std::mutex mutex;
        std::condition_variable done;
        std::size_t acks = 1, answered = 0;  // this replica holds it already
    };
    auto tally = std::make_shared<Tally>();
    for (auto* peer : targets) {
        // Asynchronous: a slow peer must not hold the client past the quorum.
        // stop() waits for these, as they use the peer's client.
        ++impl_->pushes_in_flight;
        peer->client.async_request("POST", protocol::apply_target(), text, impl_->options.quorum_timeout, {},
                                   [impl = impl_.get(), tally](std::exception_ptr error, net::Response response) {
                                       {
                                           std::lock_guard lock(tally->mutex);
                                           ++tally->answered;
                                           if (!error && response.status == 200) ++tally->acks;
                                           tally->done.notify_all();
                                       }
                                       --impl->pushes_in_flight;
                                   });
    }
    std::unique_lock lock(tally->mutex);
    tally->done.wait_for(lock, impl_->options.quorum_timeout,
                         [&] { return tally->acks >= needed || tally->answered == targets.size(); });
    if (tally->acks < needed)
        throw oci::Error(oci::ErrorCode::unavailable, "write quorum not reached",
                         std::to_string(tally->acks) + " of " + std::to_string(needed) + " replicas hold the write");
}

}  // namespace berth::replication
