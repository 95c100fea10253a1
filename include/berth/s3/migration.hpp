#pragma once
// Moving a replica's files store into its bucket: `berth migrate --to-s3` copies the bulk while
// the replica still serves from its files, and the first start on the bucket copies what was
// pushed since, then sets the files aside, never removing them (docs/storage.md, "Moving a files
// store into a bucket").
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace berth::s3 {

class S3BlobStore;

struct MigrationReport {
    std::size_t blobs = 0;    // blob files seen
    std::size_t copied = 0;   // uploaded
    std::size_t present = 0;  // the bucket held them whole already
    std::uint64_t bytes_copied = 0;
    std::vector<std::string> corrupt;  // files whose bytes do not match their digest: not copied
    std::vector<std::string> failed;   // could not be copied now (the bucket refused or was away, unreadable)
};

struct MigrationOptions {
    unsigned parallel = 4;  // blobs copied at once
    const std::atomic<bool>* stop = nullptr;
    std::function<void(const MigrationReport&)> progress;  // after each blob, under a lock
};

// Every blob file under <root>/blobs is verified against its digest and uploaded unless the bucket
// holds an object of the same size under its key already. Reads the files only, and leaves the
// scratch files alone: safe beside a berth serving from root.
MigrationReport move_files_into(S3BlobStore& bucket, const std::filesystem::path& root,
                                const MigrationOptions& options = {});

}  // namespace berth::s3
