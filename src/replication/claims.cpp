// Claims on new immutable tags (docs/ha.md). Every replica promises at most one
// digest per tag, durably, before it answers; a push takes a tag only once a
// majority of the replicas promised its digest. Two majorities share a replica,
// which promised only one digest: of two first pushes with different digests
// at most one takes the tag, under any partition. A push that cannot gather a
// majority writes nothing, so a refused push never takes the tag later.
#include <condition_variable>
#include <mutex>

#include "berth/replication/protocol.hpp"
#include "berth/storage/layout.hpp"
#include "berth/storage/meta_store.hpp"
#include "replicator_impl.hpp"

namespace berth::replication {

protocol::ClaimAnswer Replicator::answer_claim(const protocol::ClaimRequest& request) {
    if (request.expires_ms && now_ms() > request.expires_ms) return {false, {}};
    auto& meta = impl_->meta;
    // Under the lock that orders this replica's writes: a tag pushed here meanwhile is seen.
    auto lock = meta.lock_writes();
    if (auto tag = meta.tag(request.repo, request.tag); tag && !tag->deleted())
        return {tag->digest == request.digest, tag->digest};
    const auto key = storage::layout::setting::tag_claim(request.repo, request.tag);
    if (auto promised = meta.setting(key)) return {*promised == request.digest, *promised};
    meta.put_setting(key, request.digest);  // synced: a promise survives a crash
    return {true, request.digest};
}

registry::TagClaim Replicator::claim_tag(const std::string& repo, const std::string& tag, const std::string& digest) {
    using Outcome = registry::TagClaim::Outcome;
    std::vector<Peer*> targets;
    {
        std::lock_guard lock(impl_->mutex);
        for (auto& peer : impl_->peers)
            if (!peer->self) targets.push_back(peer.get());
    }
    const std::size_t replicas = targets.size() + 1;
    const std::size_t majority = replicas / 2 + 1;
    // Promises for another digest that leave this one short of a majority for good.
    const std::size_t blocking = replicas - majority + 1;

    struct Tally {
        std::mutex mutex;
        std::condition_variable done;
        std::size_t granted = 0, refused = 0, answered = 0;
        std::string holder;
    };
    auto tally = std::make_shared<Tally>();
    auto count = [tally](const protocol::ClaimAnswer& answer) {
        std::lock_guard lock(tally->mutex);
        if (answer.granted) {
            ++tally->granted;
        } else if (!answer.digest.empty()) {
            ++tally->refused;
            tally->holder = answer.digest;
        }
        tally->done.notify_all();
    };
    // A replica must promise in the first three quarters of the wait: a promise made later
    // could arrive after the wait is over, reserving the tag for a push that was answered 503.
    const auto wait_ms = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(impl_->options.quorum_timeout).count());
    const protocol::ClaimRequest request{repo, tag, digest, now_ms() + wait_ms * 3 / 4};
    count(answer_claim(request));
    const auto body = protocol::encode_claim(request);
    for (auto* peer : targets) {
        ++impl_->pushes_in_flight;
        peer->client.async_request(
            "POST", protocol::claim_target(), body, impl_->options.quorum_timeout, {},
            [impl = impl_.get(), tally, count](std::exception_ptr error, net::Response response) {
                // A replica that does not answer, or answers garbage, promised nothing.
                if (!error && response.status == 200) {
                    try {
                        count(protocol::parse_claim_answer(response.body));
                    } catch (const std::invalid_argument&) {}
                }
                {
                    std::lock_guard lock(tally->mutex);
                    ++tally->answered;
                    tally->done.notify_all();
                }
                --impl->pushes_in_flight;
            });
    }
    std::unique_lock lock(tally->mutex);
    tally->done.wait_for(lock, impl_->options.quorum_timeout, [&] {
        return tally->granted >= majority || tally->refused >= blocking || tally->answered == targets.size();
    });
    const auto detail = std::to_string(tally->granted) + " of " + std::to_string(replicas) + " replicas promised it, " +
                        std::to_string(majority) + " needed";
    if (tally->granted >= majority) return {Outcome::granted, {}, detail};
    if (tally->refused >= blocking) return {Outcome::taken, tally->holder, detail};
    return {Outcome::undecided, {}, detail};
}

}  // namespace berth::replication
