// The registry's side of replication: content missing here read through from
// the other replicas, and writes that return once the write quorum holds them.
#include <condition_variable>
#include <mutex>

#include "berth/oci/error.hpp"
#include "berth/net/reach.hpp"
#include "berth/replication/protocol.hpp"
#include "berth/storage/meta_store.hpp"
#include "replicator_impl.hpp"

namespace berth::replication {

using storage::Event;

registry::Lookup Replicator::fetch_blob(const std::string& repo, const oci::Digest& digest) {
    net::reach(net::peers_party);
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
            auto record = protocol::parse_record(response.body, protocol::RecordKind::link);
            Event event{Event::Type::link, repo, digest.str(), {}, record.stamp};
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
    net::reach(net::peers_party);
    const bool by_digest = reference.find(':') != std::string::npos;
    for (auto* source : impl_->sources(nullptr)) {
        try {
            const auto kind = by_digest ? protocol::RecordKind::manifest : protocol::RecordKind::tag;
            auto response =
                source->request("GET", protocol::record_target(repo, kind, reference), {}, std::chrono::seconds(2));
            if (response.status != 200) continue;
            auto record = protocol::parse_record(response.body, kind);
            std::vector<PeerClient*> sources{source};
            if (by_digest) impl_->applier.apply_manifest(repo, reference, record.stamp, std::nullopt, sources);
            else impl_->applier.apply({Event::Type::tag, repo, record.digest, reference, record.stamp}, sources);
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
