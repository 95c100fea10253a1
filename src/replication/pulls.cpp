// What retention asks of the other replicas: which one judges a repository,
// and when each last served the repository's tags and digests.
#include <nlohmann/json.hpp>

#include "berth/observe/log.hpp"
#include "berth/replication/protocol.hpp"
#include "berth/replication/replicator.hpp"
#include "replicator_impl.hpp"

namespace berth::replication {

bool Replicator::evaluates(const std::string& repo) {
    // Before it has caught up, a replica may not know a tag was pushed again:
    // it judges nothing until then.
    return ready() && !owner_of(repo);
}

std::optional<std::vector<std::pair<std::string, std::uint64_t>>> Replicator::pulls_elsewhere(const std::string& repo,
                                                                                              std::uint64_t since_ms) {
    std::vector<PeerClient*> others;
    {
        std::lock_guard lock(impl_->mutex);
        for (auto& peer : impl_->peers) {
            if (peer->self) continue;
            // One not reached yet may have served a pull: it is not skipped, it makes the answer unknown.
            if (peer->id.empty() || !peer->reachable || !peer->incompatible.empty()) return std::nullopt;
            others.push_back(&peer->client);
        }
    }
    std::vector<std::pair<std::string, std::uint64_t>> out;
    for (auto* peer : others) {
        std::string after;
        for (bool more = true; more;) {
            try {
                auto response =
                    peer->request("GET", protocol::pulls_target(repo, since_ms, after), {}, std::chrono::seconds(10));
                auto page = response.status == 200 ? protocol::parse_pulls(response.body) : std::nullopt;
                if (!page) {
                    observe::log("warn", "a replica did not answer for its pull times",
                                 {{"peer", peer->address()}, {"repository", repo}, {"status", response.status}});
                    return std::nullopt;
                }
                if (page->pulls.empty()) break;
                after = page->pulls.back().first;
                more = page->more;
                out.insert(out.end(), page->pulls.begin(), page->pulls.end());
            } catch (const std::exception& error) {
                observe::log("warn", "a replica could not be asked for its pull times",
                             {{"peer", peer->address()}, {"repository", repo}, {"error", error.what()}});
                return std::nullopt;
            }
        }
    }
    return out;
}

}  // namespace berth::replication
