#pragma once
// Content-addressed, immutable blob files under <root>/blobs/<alg>/<2 hex>/<hex>,
// and the scratch directory uploads are written into before they are committed.
#include <cstdint>
#include <filesystem>
#include <optional>

#include "berth/oci/digest.hpp"

namespace berth::storage {

class BlobStore {
public:
    explicit BlobStore(std::filesystem::path root);

    std::filesystem::path path(const oci::Digest& digest) const;
    std::optional<std::uint64_t> size(const oci::Digest& digest) const;

    // Makes a verified scratch file the blob for digest: fsync, rename, fsync of
    // the directory. If the blob already exists the scratch file is dropped.
    void commit(const std::filesystem::path& scratch, const oci::Digest& digest);
    bool remove(const oci::Digest& digest);

    const std::filesystem::path& scratch_dir() const { return scratch_; }

private:
    std::filesystem::path blobs_;
    std::filesystem::path scratch_;
};

void fsync_path(const std::filesystem::path& path);

}  // namespace berth::storage
