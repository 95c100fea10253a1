#include "berth/s3/migration.hpp"

#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "berth/observe/log.hpp"
#include "berth/s3/blob_store.hpp"
#include "berth/storage/blob_hash.hpp"
#include "berth/storage/blob_store.hpp"

namespace berth::s3 {
namespace {

struct Migration {
    S3BlobStore& bucket;
    storage::FileBlobStore files;
    const MigrationOptions& options;
    std::vector<oci::Digest> digests;
    std::atomic<std::size_t> next{0};
    std::mutex mutex;  // report
    MigrationReport report;

    bool stopped() const { return options.stop && *options.stop; }

    void move(const oci::Digest& digest) {
        enum { copied, present, corrupt, failed, gone } outcome = failed;
        std::uint64_t size = 0;
        try {
            auto blob = files.open(digest);
            if (!blob) {
                outcome = gone;  // collected meanwhile
            } else if (auto hashed = storage::hash(*blob, digest.algorithm()); !hashed || hashed->digest != digest) {
                outcome = corrupt;
            } else {
                size = blob->size();
                outcome = bucket.adopt(*blob, digest) ? copied : present;
            }
        } catch (const std::exception& error) {
            observe::log("warning", "could not copy a blob into the bucket",
                         {{"digest", digest.str()}, {"error", error.what()}});
        }
        std::lock_guard lock(mutex);
        switch (outcome) {
            case copied: ++report.copied, report.bytes_copied += size; break;
            case present: ++report.present; break;
            case corrupt: report.corrupt.push_back(digest.str()); break;
            case failed: report.failed.push_back(digest.str()); break;
            case gone: break;
        }
        if (options.progress) options.progress(report);
    }

    void work() {
        for (std::size_t n; !stopped() && (n = next++) < digests.size();) move(digests[n]);
    }
};

}  // namespace

MigrationReport move_files_into(S3BlobStore& bucket, const std::filesystem::path& root,
                                const MigrationOptions& options) {
    Migration migration{bucket, storage::FileBlobStore(root, storage::StoreUse::beside), options, {}, {}, {}, {}};
    migration.files.for_each(
        [&](const oci::Digest& digest, std::uint64_t, std::int64_t) { migration.digests.push_back(digest); });
    migration.report.blobs = migration.digests.size();
    std::vector<std::thread> helpers;
    for (unsigned i = 1; i < std::max(1u, options.parallel); ++i) helpers.emplace_back([&] { migration.work(); });
    migration.work();
    for (auto& helper : helpers) helper.join();
    return std::move(migration.report);
}

}  // namespace berth::s3
