// The parts of the peer API that read local state for another replica, and
// the change log's compaction, which depends on what they have read.
#include <nlohmann/json.hpp>

#include "berth/oci/encoding.hpp"
#include "berth/observe/log.hpp"
#include "berth/oci/error.hpp"

#include "berth/replication/protocol.hpp"
#include "berth/replication/replicator.hpp"
#include "berth/storage/blob_store.hpp"
#include "berth/storage/meta_store.hpp"
#include "berth/storage/pull_times.hpp"
#include "replicator_impl.hpp"

#include <algorithm>

namespace berth::replication {

using storage::Event;

namespace {

constexpr auto session_idle = std::chrono::minutes(2);
constexpr std::size_t max_sessions = 8;      // bootstraps served at once; each pins old versions
constexpr std::size_t page_bytes = 4 << 20;  // of manifests, per page of state
constexpr std::size_t max_page_records = 5000;

}  // namespace

std::pair<int, std::string> Replicator::log_json(const protocol::LogRequest& request, const std::string& caller) const {
    const auto [after, limit] = request;
    impl_->note_peer_cursor(caller, after);
    const auto first = impl_->meta.log_first();
    const auto head = impl_->meta.log_head();
    protocol::LogPage page{impl_->self_id, impl_->epoch, head, first, impl_->filling.load(), {}};
    if (after + 1 < first && after < head)
        return {410, protocol::encode_log_page(page)};  // entries it has not read are gone
    for (auto& entry : impl_->meta.read_log(after, std::min<std::size_t>(limit, 1000)))
        page.entries.emplace_back(entry.sequence, entry.event);
    return {200, protocol::encode_log_page(page)};
}

std::shared_ptr<const storage::StateView> Replicator::Impl::session_view(std::string& id) {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard lock(serving_mutex);
    for (auto it = sessions.begin(); it != sessions.end();)
        it = now - it->second.used > session_idle ? sessions.erase(it) : std::next(it);
    if (auto it = sessions.find(id); it != sessions.end()) {
        it->second.used = now;
        return it->second.view;
    }
    if (sessions.size() >= max_sessions) {
        auto oldest = std::min_element(sessions.begin(), sessions.end(),
                                       [](auto& a, auto& b) { return a.second.used < b.second.used; });
        sessions.erase(oldest);  // its reader goes on from a new moment: slower, never wrong
    }
    id = oci::random_hex(8);
    auto view = meta.state_view();
    sessions[id] = {view, now};
    return view;
}

std::string Replicator::state_json(const protocol::StateRequest& request, const std::string& caller) const {
    if (request.since) impl_->note_peer_cursor(caller, request.since);
    auto session = request.session;
    auto view = impl_->session_view(session);
    auto page = impl_->meta.state_page(view.get(), request.part, request.after,
                                       std::clamp<std::size_t>(request.limit, 1, max_page_records), page_bytes,
                                       !request.summary);
    return protocol::encode_state({impl_->self_id, impl_->epoch, session, view->head, std::move(page)});
}

void Replicator::Impl::note_peer_cursor(const std::string& replica, std::uint64_t sequence) {
    // Any id would hold back compaction for a reader that never comes: only what a replica can be.
    if (!protocol::valid_replica_id(replica) || replica == self_id) return;
    std::lock_guard lock(serving_mutex);
    auto& cursor = peer_cursors[replica];
    if (cursor != sequence) peer_cursors_changed = true;
    cursor = sequence;
}

void Replicator::Impl::load_peer_cursors() {
    peer_cursors = protocol::parse_cursors(meta.setting(storage::layout::setting::peer_cursors).value_or(""));
}

void Replicator::Impl::save_peer_cursors() {
    std::string text;
    {
        std::lock_guard lock(serving_mutex);
        if (!peer_cursors_changed) return;
        text = protocol::encode_cursors(peer_cursors);
        peer_cursors_changed = false;
    }
    meta.put_setting(storage::layout::setting::peer_cursors, text);
}

std::uint64_t log_compaction_point(const storage::MetaStore& meta, const LogRetention& retention,
                                   const std::vector<std::uint64_t>& peer_cursors, std::uint64_t now_ms) {
    const auto head = meta.log_head();
    const auto window = static_cast<std::uint64_t>(retention.window.count()) * 1000;
    auto through = now_ms > window ? meta.log_written_before(now_ms - window) : 0;
    for (auto cursor : peer_cursors) through = std::min(through, cursor);
    // Beyond the cap, a peer that stopped reading re-bootstraps instead.
    if (head > retention.max_entries) through = std::max(through, head - retention.max_entries);
    return std::min(through, head);
}

void compact_log(storage::MetaStore& meta, const LogRetention& retention, Replicator* replicator,
                 const std::vector<std::uint64_t>& readers) {
    std::vector<std::uint64_t> cursors = readers;
    if (replicator) {
        auto peers = replicator->peer_cursors();
        cursors.insert(cursors.end(), peers.begin(), peers.end());
    }
    const auto through = log_compaction_point(meta, retention, cursors, now_ms());
    if (through < meta.log_first()) return;
    meta.compact_log(through);
    observe::log("info", "change log compacted", {{"through", through}, {"head", meta.log_head()}});
}

std::vector<std::uint64_t> Replicator::peer_cursors() const {
    impl_->save_peer_cursors();
    std::lock_guard lock(impl_->serving_mutex);
    std::vector<std::uint64_t> out;
    for (auto& [replica, sequence] : impl_->peer_cursors) out.push_back(sequence);
    return out;
}

std::optional<storage::OpenBlob> Replicator::blob_file(const std::string& digest_text) const {
    auto digest = oci::Digest::parse(digest_text);
    if (!digest) return std::nullopt;
    return impl_->blobs.open(*digest);
}

std::optional<std::pair<std::string, std::string>> Replicator::manifest_content(const std::string& repo,
                                                                                const std::string& digest) const {
    auto record = impl_->meta.manifest(repo, digest);
    if (!record || record->deleted) return std::nullopt;
    return std::pair{record->media_type, std::move(record->bytes)};
}

std::optional<std::string> Replicator::record_json(const protocol::RecordRequest& request) const {
    const auto& [repo, kind, key] = request;
    if (kind == protocol::RecordKind::link) {
        auto record = impl_->meta.link(repo, key);
        auto digest = oci::Digest::parse(key);
        if (!record || record->deleted || !digest || !impl_->blobs.size(*digest)) return std::nullopt;
        return protocol::encode_record({record->stamp, {}});
    }
    if (kind == protocol::RecordKind::manifest) {
        auto record = impl_->meta.manifest(repo, key);
        if (!record || record->deleted) return std::nullopt;
        return protocol::encode_record({record->stamp, {}});
    }
    auto record = impl_->meta.tag(repo, key);
    if (!record || record->deleted()) return std::nullopt;
    return protocol::encode_record({record->stamp, record->digest});
}

std::string Replicator::pulls_json(const protocol::PullsRequest& request) const {
    protocol::PullsPage page;
    // One more than a page tells whether more follow.
    page.pulls = impl_->pulls.since(request.repo, request.since_ms, request.after, protocol::pulls_page + 1);
    page.more = page.pulls.size() > protocol::pulls_page;
    if (page.more) page.pulls.pop_back();
    return protocol::encode_pulls(page);
}

bool Replicator::authorized(std::string_view secret) const {
    const auto& expected = impl_->options.secret;
    return !expected.empty() && oci::equal_secrets(secret, expected);
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

}  // namespace berth::replication
