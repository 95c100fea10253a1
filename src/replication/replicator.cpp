#include "berth/replication/replicator.hpp"

#include "replicator_impl.hpp"

namespace berth::replication {

std::uint64_t now_ms() {
    using namespace std::chrono;
    return static_cast<std::uint64_t>(duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count());
}

Replicator::Replicator(Options options, std::string self_id, storage::BlobStore& blobs, storage::MetaStore& meta,
                       storage::HybridClock& clock, const storage::PullTimes& pulls, ContentRules rules,
                       const storage::BackupJob* backups)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(self_id), blobs, meta, clock, pulls, std::move(rules),
                                   backups)) {}

Replicator::~Replicator() { stop(); }

}  // namespace berth::replication
