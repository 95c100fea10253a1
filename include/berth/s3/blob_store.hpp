#pragma once
// Blob bytes in an S3 bucket (docs/storage.md): one object per blob under a content-addressed
// key, shared by every replica of a cluster, which replicate only their indexes. A blob is
// uploaded whole (one PUT, or a multipart upload completed only once every part is in) before
// its push is acknowledged, so a final key never holds a partial object. Hot blobs are read from
// a cache on the replica's disk; the rest is streamed from the bucket with ranged GETs.
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>

#include "berth/s3/client.hpp"
#include "berth/s3/options.hpp"
#include "berth/storage/blob_cache.hpp"
#include "berth/storage/blob_store.hpp"

namespace berth::net {
class Client;
}
namespace berth::observe {
class MetricsWriter;
}

namespace berth::s3 {

class S3BlobStore : public storage::BlobStore {
public:
    // root: the replica's own directory (scratch files, the cache). Throws std::invalid_argument
    // on a bad option.
    S3BlobStore(const std::filesystem::path& root, StoreOptions options,
                storage::StoreUse use = storage::StoreUse::owner);
    ~S3BlobStore() override;

    std::optional<std::uint64_t> size(const oci::Digest& digest) const override;
    std::optional<storage::OpenBlob> open(const oci::Digest& digest) const override;
    std::optional<storage::OpenBlob> open_stored(const oci::Digest& digest) const override;
    std::optional<std::string> redirect(const oci::Digest& digest) const override;
    bool remove(const oci::Digest& digest) override;
    bool touch(const oci::Digest& digest) override;
    bool remove_if_older(const oci::Digest& digest, std::chrono::system_clock::time_point cutoff) override;
    bool quarantine(const oci::Digest& digest) override;
    bool mend(const oci::Digest& digest) override;
    void for_each(
        const std::function<void(const oci::Digest&, std::uint64_t size, std::int64_t mtime)>& visit) const override;

    // Aborts the multipart uploads under the prefix begun more than abandoned_after ago (a
    // replica that died mid-push leaves them); returns how many.
    std::size_t abort_abandoned();
    std::string party() const override { return s3_party; }
    // A verified blob held elsewhere (a files store moving here): uploaded unless the bucket holds
    // an object of its size under its key already. True when it was uploaded.
    bool adopt(const storage::OpenBlob& blob, const oci::Digest& digest);

    struct Stats {
        std::uint64_t objects_uploaded, bytes_uploaded, multipart_uploads, uploads_aborted, renewed;
        std::uint64_t cache_hits, cache_misses, cache_evictions, cache_bytes, cache_capacity;
    };
    Stats stats() const;
    void write_metrics(observe::MetricsWriter& out) const;

protected:
    void commit(const std::filesystem::path& scratch, const oci::Digest& digest, int scratch_fd) override;

private:
    std::string key(const oci::Digest& digest) const;
    std::optional<oci::Digest> digest_of(const std::string& key) const;
    void upload(const storage::OpenBlob& bytes, const std::string& key);
    bool renew_if_whole(const std::string& object, std::uint64_t size);
    void abort_quietly(const std::string& object, const std::string& upload_id);
    void upload_parts(const storage::OpenBlob& bytes, const std::string& key);

    StoreOptions options_;
    std::unique_ptr<net::Client> http_;
    mutable Client client_;
    std::unique_ptr<storage::BlobCache> cache_;
    // Within this process, a commit's or touch's check-then-renew and garbage collection's
    // check-then-delete of one object do not interleave (across replicas, docs/storage.md).
    std::mutex collect_mutex_;
    // Parts of multipart uploads held in memory at once, across every upload: 2 x parallel_parts.
    std::mutex parts_mutex_;
    std::condition_variable part_freed_;
    unsigned parts_in_memory_ = 0;
    std::atomic<std::uint64_t> objects_uploaded_{0}, bytes_uploaded_{0}, multipart_uploads_{0}, uploads_aborted_{0},
        renewed_{0};
};

}  // namespace berth::s3
