#pragma once
// Content-addressed, immutable blob files under <root>/blobs/<alg>/<2 hex>/<hex>,
// and the scratch directory uploads are written into before they are committed.
#include <cstdint>
#include <filesystem>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "berth/oci/digest.hpp"
#include "berth/storage/filling_blob.hpp"

namespace berth::storage {

// A blob file opened for reading; closed with this unless released. With
// `filling`, the file is still arriving: read only what filling->readable() says.
class OpenBlob {
public:
    OpenBlob(int fd, std::uint64_t size, std::shared_ptr<FillingBlob> filling = nullptr)
        : fd_(fd), size_(size), filling_(std::move(filling)) {}
    OpenBlob(OpenBlob&& other) noexcept
        : fd_(std::exchange(other.fd_, -1)), size_(other.size_), filling_(std::move(other.filling_)) {}
    OpenBlob& operator=(OpenBlob&&) = delete;
    ~OpenBlob();
    int fd() const { return fd_; }
    std::uint64_t size() const { return size_; }
    const std::shared_ptr<FillingBlob>& filling() const { return filling_; }
    int release() { return std::exchange(fd_, -1); }  // the caller closes it now

private:
    int fd_;
    std::uint64_t size_;
    std::shared_ptr<FillingBlob> filling_;
};

class BlobStore {
public:
    explicit BlobStore(std::filesystem::path root);

    std::filesystem::path path(const oci::Digest& digest) const;
    std::optional<std::uint64_t> size(const oci::Digest& digest) const;
    std::optional<OpenBlob> open(const oci::Digest& digest) const;
    // A small blob's bytes (a config, a signature payload): nullopt when it is absent or larger
    // than limit.
    std::optional<std::string> read(const oci::Digest& digest, std::uint64_t limit) const;

    // Makes a verified scratch file the blob for digest: fsync, rename, fsync of
    // the directory. If the blob already exists the scratch file is dropped.
    void commit(const std::filesystem::path& scratch, const oci::Digest& digest);
    bool remove(const oci::Digest& digest);
    // Renews an existing blob before something links it (see commit); false if absent.
    bool touch(const oci::Digest& digest);
    // Garbage collection: removes the blob only if its file is older than
    // cutoff, atomically with respect to commit() renewing it.
    bool remove_if_older(const oci::Digest& digest, std::chrono::system_clock::time_point cutoff);
    // Moves a blob whose bytes no longer match its digest out of the way.
    void quarantine(const oci::Digest& digest);
    void for_each(const std::function<void(const oci::Digest&, std::uint64_t size, std::int64_t mtime)>& visit) const;

    // Bytes the file system holding the store can still take.
    std::uint64_t free_bytes() const;

    const std::filesystem::path& scratch_dir() const { return scratch_; }

private:
    std::filesystem::path blobs_;
    std::filesystem::path scratch_;
    std::filesystem::path quarantine_;
    std::mutex collect_mutex_;
};

void fsync_path(const std::filesystem::path& path);

}  // namespace berth::storage
