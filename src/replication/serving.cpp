// The parts of the peer API that read local state for another replica.
#include <nlohmann/json.hpp>

#include "berth/replication/protocol.hpp"
#include "berth/replication/replicator.hpp"
#include "berth/storage/blob_store.hpp"
#include "berth/storage/meta_store.hpp"
#include "berth/storage/pull_times.hpp"
#include "replicator_impl.hpp"

namespace berth::replication {

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

std::optional<std::string> Replicator::record_json(const std::string& repo, protocol::RecordKind kind,
                                                   const std::string& key) const {
    if (kind == protocol::RecordKind::link) {
        auto record = impl_->meta.link(repo, key);
        auto digest = oci::Digest::parse(key);
        if (!record || record->deleted || !digest || !impl_->blobs.size(*digest)) return std::nullopt;
        return protocol::stamp_json(record->stamp).dump();
    }
    if (kind == protocol::RecordKind::manifest) {
        auto record = impl_->meta.manifest(repo, key);
        if (!record || record->deleted) return std::nullopt;
        return protocol::stamp_json(record->stamp).dump();
    }
    if (kind == protocol::RecordKind::tag) {
        auto record = impl_->meta.tag(repo, key);
        if (!record || record->deleted()) return std::nullopt;
        auto out = protocol::stamp_json(record->stamp);
        out["digest"] = record->digest;
        return out.dump();
    }
    return std::nullopt;
}

void Replicator::set_pull_times(const storage::PullTimes* pulls) { impl_->pulls = pulls; }

std::string Replicator::pulls_json(const std::string& repo, std::uint64_t since_ms, const std::string& after) const {
    protocol::PullsPage page;
    if (impl_->pulls) {
        // One more than a page tells whether more follow.
        page.pulls = impl_->pulls->since(repo, since_ms, after, protocol::pulls_page + 1);
        page.more = page.pulls.size() > protocol::pulls_page;
        if (page.more) page.pulls.pop_back();
    }
    return protocol::encode_pulls(page);
}

}  // namespace berth::replication
