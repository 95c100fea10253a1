#pragma once
// Replicator internals shared by its source files.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "berth/storage/layout.hpp"
#include "berth/oci/encoding.hpp"
#include "applier.hpp"
#include "berth/replication/options.hpp"
#include "berth/replication/protocol.hpp"
#include "berth/oci/derived_keys.hpp"
#include "berth/replication/replicator.hpp"
#include "berth/storage/meta_store.hpp"
#include "peer_client.hpp"

namespace berth::replication {

std::uint64_t now_ms();

struct Peer {
    Peer(net::Client& http, const std::string& address, const net::TlsOptions& tls, const std::string& secret,
         const std::string& self_id)
        : client(http, address, tls, secret, self_id) {}
    PeerClient client;
    std::thread thread;

    // Guarded by Impl::mutex.
    std::string id;
    bool self = false;
    bool reachable = false;
    bool holds_readiness = true;          // until caught up, or found unreachable at first contact
    std::optional<std::uint64_t> target;  // the peer's head when we first reached it
    std::string epoch;
    std::uint64_t cursor = 0, head = 0, errors = 0, applied = 0;
    std::uint64_t last_contact_ms = 0, oldest_unapplied_ms = 0;
    std::uint64_t heard_ms = 0;  // when the last request that read its log to its head was sent
    // Since when it has failed to answer, counted from its first failure after its log was last
    // read to its head (an answer that then fails, a body that does not parse, does not reset it);
    // unset before its first failure.
    std::optional<std::chrono::steady_clock::time_point> unreachable_since;
    bool gone(std::chrono::steady_clock::time_point now, std::chrono::milliseconds after) const {
        return !reachable && unreachable_since && now - *unreachable_since >= after;
    }
    std::string last_error;
    std::string incompatible;             // why this peer's protocol is refused; empty while it is understood
    std::string bootstrap_part;           // while bootstrapping from it: the part being copied
    std::uint64_t bootstrap_records = 0;  // records received in this run of the bootstrap
    // Its own status as last asked (Impl::poll_statuses), or why it did not answer.
    std::optional<protocol::Status> status;
    std::string status_versions, status_error = "not asked yet";
};

struct Replicator::Impl {
    Impl(Options o, std::string self, storage::BlobStore& b, storage::MetaStore& m, storage::HybridClock& c,
         const storage::PullTimes& p, ContentRules rules, const storage::BackupJob* backup_job)
        : options(std::move(o)), self_id(std::move(self)), keys(options.secret), blobs(b), meta(m), clock(c), pulls(p),
          backups(backup_job), applier(b, m, c, std::move(rules)) {
        epoch = meta.setting(storage::layout::setting::log_epoch).value_or("");
        if (epoch.empty()) {
            epoch = oci::random_hex(8);
            meta.put_setting(storage::layout::setting::log_epoch, epoch);
        }
        std::string addresses;
        for (auto& address : options.peers) {
            add_peer(address);
            addresses += address + "\n";
        }
        if (!options.peer_dns.empty()) addresses += options.peer_dns + "\n";
        // For `berth restore` to ask whether any of them still runs.
        meta.put_setting(storage::layout::setting::peer_addresses, addresses);
        load_peer_cursors();
    }

    Options options;
    std::string self_id;
    oci::DerivedKeys keys;  // from the shared secret, one per purpose (Cluster::derived_key)
    storage::BlobStore& blobs;
    storage::MetaStore& meta;
    storage::HybridClock& clock;
    const storage::PullTimes& pulls;    // served to peers
    const storage::BackupJob* backups;  // its last backup is in the status; null: none
    Applier applier;
    std::string epoch;
    // Every peer request goes through it: pooled connections, timeouts.
    net::Client http;

    mutable std::mutex mutex;
    std::condition_variable wake;
    std::vector<std::unique_ptr<Peer>> peers;
    std::atomic<bool> stopping{false};
    std::atomic<int> pushes_in_flight{0};  // quorum pushes still talking to peers
    std::thread discovery;
    std::thread statuses;  // asks every peer its status, for the web UI's cluster page
    bool started = false;
    bool dns_answered = false;  // peer_dns has named replicas at least once
    void poll_statuses();

    // A StatefulSet lists every member, itself included: berth-0.berth:5000 is
    // recognised as self on replica berth-0 before any request is made.
    bool looks_like_self(const std::string& address) const {
        auto host = net::parse_host_port(address).host;
        return host == self_id || host.starts_with(self_id + ".");
    }

    Peer* add_peer(const std::string& address) {
        for (auto& peer : peers)
            if (peer->client.address() == address) return nullptr;
        auto& peer = peers.emplace_back(std::make_unique<Peer>(http, address, options.tls, options.secret, self_id));
        if (looks_like_self(address)) {
            peer->self = true;
            peer->holds_readiness = false;
        }
        return peer.get();
    }

    // Where to fetch content: first, then reachable peers, then the others —
    // "unreachable" may only mean its last poll failed, and it is back.
    std::vector<PeerClient*> sources(Peer* first) {
        std::vector<PeerClient*> out;
        if (first) out.push_back(&first->client);
        std::lock_guard lock(mutex);
        for (bool reachable : {true, false})
            for (auto& peer : peers)
                if (peer.get() != first && !peer->self && peer->reachable == reachable) out.push_back(&peer->client);
        return out;
    }

    void sleep_for(std::chrono::milliseconds duration) {
        std::unique_lock lock(mutex);
        wake.wait_for(lock, duration, [&] { return stopping.load(); });
    }

    void save_cursor(Peer& peer) {
        meta.put_setting(storage::layout::setting::cursor(peer.id), peer.epoch + ":" + std::to_string(peer.cursor));
    }

    void load_cursor(Peer& peer) {
        auto stored = meta.setting(storage::layout::setting::cursor(peer.id)).value_or("");
        auto colon = stored.find(':');
        if (colon == std::string::npos) return;
        std::lock_guard lock(mutex);
        peer.epoch = stored.substr(0, colon);
        peer.cursor = std::stoull(stored.substr(colon + 1));
    }

    // With mutex held: started, and no peer still to catch up with or refused for its protocol.
    bool ready_locked() const {
        return started && std::none_of(peers.begin(), peers.end(),
                                       [](auto& p) { return p->holds_readiness || !p->incompatible.empty(); });
    }

    // Serving: moments of the index held open for peers reading pages of
    // state, and how far each peer has read this replica's log (compaction
    // keeps what they still need).
    struct StateSession {
        std::shared_ptr<const storage::StateView> view;
        std::chrono::steady_clock::time_point used;
    };
    std::mutex serving_mutex;
    std::map<std::string, StateSession> sessions;
    std::map<std::string, std::uint64_t> peer_cursors;  // replica id -> last sequence it asked after
    bool peer_cursors_changed = false;
    std::shared_ptr<const storage::StateView> session_view(std::string& id);
    void note_peer_cursor(const std::string& replica, std::uint64_t sequence);
    void load_peer_cursors();
    void save_peer_cursors();

    void follow(Peer& peer);
    // One page of a peer's log, taken or waited for: false once the peer turns out to be this
    // replica (nothing to follow).
    bool follow_page(Peer& peer, bool& first_contact);
    void note_contact(Peer& peer, std::uint64_t head, bool filling);
    void note_unreachable(Peer& peer, const std::string& error, std::chrono::steady_clock::time_point started_at);
    // Applies a log page's entries in order and saves the cursor; false when one's content was out of reach.
    bool apply_entries(Peer& peer, const std::vector<std::pair<std::uint64_t, std::string>>& entries);
    bool check_protocol(Peer& peer, const std::string& versions_header);
    // Copies the peer's whole state, page by page; where this replica holds
    // anything, only the ranges where its records differ. Resumes where a
    // previous run stopped. One at a time: after the first, the others find
    // nearly every range alike.
    void bootstrap(Peer& peer);
    std::mutex bootstrap_mutex;
    // An empty replica copying a peer: what it logs meanwhile are relays, and
    // its peers neither wait for it nor copy it (log answers say so).
    std::atomic<bool> filling{false};
    void resolve_dns();
};

}  // namespace berth::replication
