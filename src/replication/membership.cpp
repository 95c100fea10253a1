// Who is in the cluster and who owns what: the replica that fetches a key from
// upstream registries for everyone, and how to reach a replica.
#include <algorithm>

#include "berth/net/host_port.hpp"
#include "replicator_impl.hpp"

namespace berth::replication {

const std::string& Replicator::self_id() const { return impl_->self_id; }
std::string Replicator::derived_key(std::string_view purpose) const { return impl_->keys.key(purpose); }

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

bool Replicator::leads(std::string_view key) const {
    std::lock_guard lock(impl_->mutex);
    if (!impl_->ready_locked()) return false;
    const auto mine = rendezvous_score(impl_->self_id, key);
    for (auto& peer : impl_->peers) {
        if (peer->self || !peer->reachable || peer->id.empty() || !peer->incompatible.empty()) continue;
        if (peer->status && peer->status->ready && rendezvous_score(peer->id, key) > mine) return false;
    }
    return true;
}

// A client of the moment for any replica's address: the peers' own clients are their followers'.
std::unique_ptr<net::Exchange> Replicator::open_peer(const std::string& address, net::RequestHead head) const {
    PeerClient peer(impl_->http, address, impl_->options.tls, impl_->options.secret, impl_->self_id);
    return peer.open(std::move(head));
}

net::Response Replicator::ask_peer(const std::string& address, net::RequestHead head, std::size_t limit) const {
    PeerClient peer(impl_->http, address, impl_->options.tls, impl_->options.secret, impl_->self_id);
    return peer.ask(std::move(head), limit);
}

std::vector<std::string> Replicator::peer_addresses() const {
    std::lock_guard lock(impl_->mutex);
    std::vector<std::string> out;
    for (auto& peer : impl_->peers)
        if (!peer->self) out.push_back(peer->client.address());
    return out;
}

std::uint64_t Replicator::heard_until_ms(std::chrono::milliseconds gone_after) const {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard lock(impl_->mutex);
    // Its peers not yet named by DNS: what is here may lack changes older than those they pushed it.
    if (!impl_->options.peer_dns.empty() && !impl_->dns_answered) return 0;
    auto until = now_ms();
    for (auto& peer : impl_->peers) {
        if (peer->self || !peer->incompatible.empty()) continue;
        if (!peer->gone(now, gone_after)) until = std::min(until, peer->heard_ms);
    }
    return until;
}

bool Replicator::catching_up(std::chrono::milliseconds gone_after) const {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard lock(impl_->mutex);
    return !impl_->started || std::any_of(impl_->peers.begin(), impl_->peers.end(), [&](auto& peer) {
        return !peer->self && peer->holds_readiness && peer->incompatible.empty() && !peer->gone(now, gone_after);
    });
}

std::uint64_t Replicator::heard_from_every_peer_until_ms() const {
    std::lock_guard lock(impl_->mutex);
    auto until = now_ms();
    for (auto& peer : impl_->peers)
        if (!peer->self) until = std::min(until, peer->heard_ms);
    return until;
}

std::optional<std::string> Replicator::address_of(const std::string& replica_id) const {
    std::lock_guard lock(impl_->mutex);
    for (auto& peer : impl_->peers)
        if (!peer->self && peer->id == replica_id) return peer->client.address();
    return std::nullopt;
}

}  // namespace berth::replication
