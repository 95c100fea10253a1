#pragma once
// Upload sessions' scratch files, on the replica's own disk whatever store holds the blobs: a
// session's bytes live here until they are verified and committed as a blob.
#include <filesystem>
#include <functional>
#include <string>

#include "berth/oci/digest.hpp"
#include "berth/storage/upload_appender.hpp"

namespace berth::storage {

class BlobStore;

class UploadFiles {
public:
    explicit UploadFiles(BlobStore& blobs);

    bool exists(const std::string& id) const;
    // At start, when nothing is in flight: removes every session's file that keep() refuses.
    void sweep(const std::function<bool(const std::string& id)>& keep);
    // An empty file for file.id, open for appending.
    void make(UploadFile& file);
    // Opens the file for appending and, after a restart, rebuilds its hasher and offset from the
    // bytes. False: the file is gone.
    bool open(UploadFile& file, oci::DigestAlgorithm algorithm);
    void close(UploadFile& file);
    // Closes and removes the file (none once committed); fine if it is gone already.
    void remove(UploadFile& file);
    void remove(const std::string& id);
    // The digest of the file's bytes under another algorithm than the session's.
    oci::Digest digest(const UploadFile& file, oci::DigestAlgorithm algorithm) const;
    // Makes the bytes durable, so that commit() has only the rename left.
    void sync(const UploadFile& file);
    // The verified bytes become the blob for digest (BlobStore's commit).
    void commit(UploadFile& file, const oci::Digest& digest);

private:
    std::filesystem::path path(const std::string& id) const;

    BlobStore& blobs_;
};

}  // namespace berth::storage
