#pragma once
// Where blob bytes live. Blobs are immutable and content-addressed; each store (the local files
// below, or an object store's bucket) keeps them under their digest. Everything else that touches
// blob bytes goes through here: readers get an OpenBlob, writers a BlobWriter (one piece) or
// UploadFiles (upload sessions), and both end in commit(). Scratch files are always on the
// replica's own disk, whatever the store.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>

#include "berth/oci/digest.hpp"
#include "berth/storage/blob_writer.hpp"
#include "berth/storage/open_blob.hpp"

namespace berth::storage {

// How a process uses a root. Its owner (a server, or `berth gc`, `import` and `restore` once they
// hold the index) removes what a crash left in the scratch directory and makes the blob tree at
// start. A command that may run beside a server (migrate, backup, export, gc --dry-run) changes
// neither: the server must not lose its fetches in progress.
enum class StoreUse { owner, beside };

class BlobStore {
public:
    // root: the replica's own directory; bytes on their way in go to its scratch directory.
    explicit BlobStore(const std::filesystem::path& root, StoreUse use = StoreUse::owner);
    virtual ~BlobStore() = default;
    BlobStore(const BlobStore&) = delete;
    BlobStore& operator=(const BlobStore&) = delete;

    virtual std::optional<std::uint64_t> size(const oci::Digest& digest) const = 0;
    virtual std::optional<OpenBlob> open(const oci::Digest& digest) const = 0;
    // A URL a client may fetch the blob from itself (a presigned one of a bucket's object), when
    // the store hands them out and holds the blob no closer (in its cache); checks nothing.
    virtual std::optional<std::string> redirect(const oci::Digest&) const { return std::nullopt; }
    // The bytes at rest, past any local cache: what scrub checks.
    virtual std::optional<OpenBlob> open_stored(const oci::Digest& digest) const { return open(digest); }
    // A small blob's bytes (a config, a signature payload): nullopt when it is absent or larger
    // than limit.
    std::optional<std::string> read(const oci::Digest& digest, std::uint64_t limit) const;
    // A blob arriving in one piece; see BlobWriter.
    BlobWriter write(oci::DigestAlgorithm algorithm, WriteLimits limits = {});

    virtual bool remove(const oci::Digest& digest) = 0;
    // Renews an existing blob before something links it (see commit); false if absent.
    virtual bool touch(const oci::Digest& digest) = 0;
    // Garbage collection: removes the blob only if it is older than cutoff, atomically with
    // respect to commit() renewing it.
    virtual bool remove_if_older(const oci::Digest& digest, std::chrono::system_clock::time_point cutoff) = 0;
    // Moves a blob whose bytes no longer match its digest out of the way. True when the store
    // put a good copy of its own back in its place (a bucket's, from the replica's cache).
    virtual bool quarantine(const oci::Digest& digest) = 0;
    // Puts a good copy of its own (a bucket's store: the replica's cache, verified again) in place
    // of a blob lost from where it is kept; false when it has none.
    virtual bool mend(const oci::Digest&) { return false; }
    virtual void for_each(
        const std::function<void(const oci::Digest&, std::uint64_t size, std::int64_t mtime)>& visit) const = 0;

    // The outside party the bytes live with (a bucket: s3::s3_party), "" for none. size(), open()
    // and commit() then wait on it: no caller holds a lock every writer needs across them, and
    // requests that store a blob are planned on that party's pool, not on the shared workers.
    virtual std::string party() const { return {}; }
    bool remote() const { return !party().empty(); }
    // Bytes the disk holding the scratch files can still take.
    std::uint64_t free_bytes() const;

protected:
    friend class BlobWriter;
    friend class UploadFiles;
    // Makes a verified scratch file the blob for digest, durably. If the blob exists already at
    // the same size, it is renewed instead and the scratch file dropped. scratch_fd: the file
    // open, when the caller holds it (syncing through it spares opening the file again), else -1;
    // the caller closes it.
    virtual void commit(const std::filesystem::path& scratch, const oci::Digest& digest, int scratch_fd) = 0;
    const std::filesystem::path& scratch_dir() const { return scratch_; }
    // For stores whose blobs live elsewhere: the scratch file's bytes, and its end.
    static OpenBlob open_scratch(const std::filesystem::path& scratch);
    static void drop_scratch(const std::filesystem::path& scratch);

private:
    std::filesystem::path scratch_;
};

// The blobs as files under <root>/blobs/<alg>/<2 hex>/<hex> (layout.hpp).
class FileBlobStore : public BlobStore {
public:
    explicit FileBlobStore(const std::filesystem::path& root, StoreUse use = StoreUse::owner);
    // Whether root holds any blob file (a files store, or what is left of one moved elsewhere).
    static bool holds_blobs(const std::filesystem::path& root);
    // Renames root's blob files aside, whole, once a bucket holds them all (berth migrate); returns
    // where they went. Renamed back, they are the files store again.
    static std::filesystem::path set_aside(const std::filesystem::path& root);

    std::optional<std::uint64_t> size(const oci::Digest& digest) const override;
    std::optional<OpenBlob> open(const oci::Digest& digest) const override;
    bool remove(const oci::Digest& digest) override;
    bool touch(const oci::Digest& digest) override;
    bool remove_if_older(const oci::Digest& digest, std::chrono::system_clock::time_point cutoff) override;
    bool quarantine(const oci::Digest& digest) override;
    void for_each(
        const std::function<void(const oci::Digest&, std::uint64_t size, std::int64_t mtime)>& visit) const override;

protected:
    void commit(const std::filesystem::path& scratch, const oci::Digest& digest, int scratch_fd) override;

private:
    friend struct BackupFiles;  // backups link blob files (backup.cpp)
    std::filesystem::path path(const oci::Digest& digest) const;
    // Held shared from a commit's rename to its folder's fsync, over a tree whose folders' entries
    // are all durable (made again first, alone, when they may not be).
    std::shared_lock<std::shared_mutex> durable_tree(const std::filesystem::path& dir);
    void remake_tree(const std::filesystem::path& dir);

    std::filesystem::path blobs_;
    std::filesystem::path quarantine_;
    std::mutex collect_mutex_;
    // Shared by commits from their rename to their folder's fsync; held alone to make the tree
    // again, so no commit answers from a folder whose entry is not yet durable. tree_durable_ is
    // false from a remake's start until all its fsyncs succeeded: a failed one is tried again.
    std::shared_mutex tree_mutex_;
    bool tree_durable_ = false;
};

}  // namespace berth::storage
