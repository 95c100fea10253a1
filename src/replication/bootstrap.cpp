// The receiving side of a bootstrap: a peer's whole state, page by page.
//
// Pages come from one moment of the peer's index while it keeps that moment
// open; if it restarts (or forgets it), the next page comes from a newer
// moment. Either way this replica follows the peer's log afterwards from the
// head of the first moment it read, so whatever changed after any page was
// read reaches it through the log, and applying records is idempotent (the
// newest stamp wins). Progress is saved after every page, so a bootstrap
// interrupted on either side goes on from the page it was at.
#include <nlohmann/json.hpp>

#include "berth/observe/log.hpp"
#include "berth/oci/encoding.hpp"
#include "berth/replication/protocol.hpp"
#include "berth/storage/meta_store.hpp"
#include "replicator_impl.hpp"

namespace berth::replication {

namespace {

using storage::StatePart;

using Progress = protocol::BootstrapProgress;

std::optional<Progress> load_progress(const storage::MetaStore& meta, const std::string& peer_id) {
    return protocol::parse_progress(meta.setting(storage::layout::setting::bootstrap(peer_id)).value_or(""));
}

void save_progress(storage::MetaStore& meta, const std::string& peer_id, const Progress& p) {
    meta.put_setting(storage::layout::setting::bootstrap(peer_id), protocol::encode_progress(p));
}

// A page of the peer's state where progress stands (summary: its hash only). A page is built from
// a held snapshot in milliseconds; a peer silent for 20 s is gone (partitioned, frozen), and while
// this waits no other bootstrap runs and the peer still counts as reachable.
protocol::StatePageAnswer fetch_state(Peer& peer, Progress& progress, std::string& session, std::size_t page_records,
                                      bool summary) {
    protocol::StateRequest request{progress.part, progress.after, page_records, session, progress.since, summary};
    auto response = peer.client.request("GET", protocol::state_target(request), {}, std::chrono::seconds(20));
    if (response.status != 200)
        throw std::runtime_error("peer answered " + std::to_string(response.status) + " to /state");
    auto answer = protocol::parse_state(response.body);
    if (answer.epoch != peer.epoch) throw std::runtime_error("peer started a new log during bootstrap");
    if (session != answer.session) {
        // A new moment: the first one's head is where the log takes over.
        if (progress.since == 0) progress.since = answer.head;
        session = answer.session;
    }
    return answer;
}

}  // namespace

void Replicator::Impl::bootstrap(Peer& peer) {
    std::unique_lock one_at_a_time(bootstrap_mutex, std::defer_lock);
    while (!one_at_a_time.try_lock())
        if (stopping) return;
        else sleep_for(std::chrono::milliseconds(200));
    auto progress = load_progress(meta, peer.id);
    const bool resumed = progress && progress->epoch == peer.epoch;
    if (!resumed) progress = Progress{peer.epoch, 0, StatePart::links, {}, peer.cursor > 0 || meta.log_head() > 0};
    struct Filling {
        std::atomic<bool>& flag;
        explicit Filling(std::atomic<bool>& f, bool on) : flag(f) { flag = on; }
        ~Filling() { flag = false; }
    } filling_now(filling, !progress->incremental);
    observe::log("info", resumed ? "resuming bootstrap from peer" : "bootstrapping from peer",
                 {{"peer", peer.client.address()}, {"peer_id", peer.id}, {"incremental", progress->incremental}});

    constexpr std::size_t page_records = 1000;
    std::string session;
    std::uint64_t records = 0, pages_skipped = 0;
    const auto src = sources(&peer);
    auto fetch = [&](bool summary) { return fetch_state(peer, *progress, session, page_records, summary); };
    struct ShownInStatus {
        Impl& impl;
        Peer& peer;
        ~ShownInStatus() {
            std::lock_guard lock(impl.mutex);
            peer.bootstrap_part.clear();
        }
    } shown{*this, peer};
    while (!stopping) {
        auto answer = fetch(progress->incremental);
        if (progress->incremental) {
            // Compare first: a range both hold alike is not transferred.
            if (meta.state_hash(progress->part, progress->after, answer.page.last) != answer.page.hash)
                answer = fetch(false);
            else if (answer.page.count) ++pages_skipped;
        }
        records += answer.page.records.size();
        {
            std::lock_guard lock(mutex);
            peer.bootstrap_part = protocol::part_name(progress->part);
            peer.bootstrap_records = records;
        }
        if (applier.apply_state(progress->part, answer.page.records, src, options.bootstrap_parallelism, &stopping) ==
            ApplyResult::unavailable)
            throw std::runtime_error("bootstrap interrupted: content could not be fetched");
        meta.sync();
        if (!answer.page.done) {
            progress->after = answer.page.last;
        } else if (progress->part == StatePart::tags) {
            break;
        } else {
            progress->part = static_cast<StatePart>(static_cast<int>(progress->part) + 1);
            progress->after.clear();
        }
        save_progress(meta, peer.id, *progress);
    }
    if (stopping) return;  // the saved progress resumes it
    {
        std::lock_guard lock(mutex);
        peer.cursor = progress->since;
    }
    save_cursor(peer);
    meta.put_setting(storage::layout::setting::bootstrap(peer.id), "");
    observe::log("info", "bootstrap finished",
                 {{"peer", peer.client.address()},
                  {"records", records},
                  {"pages_skipped", pages_skipped},
                  {"cursor", peer.cursor}});
}

}  // namespace berth::replication
