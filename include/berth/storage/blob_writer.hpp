#pragma once
// A blob arriving in one piece from somewhere the store does not control (an upstream, a peer, an
// import): written to a scratch file and hashed as it comes, then verified and made the blob for
// its digest by commit(). Dropped without commit, it leaves nothing behind.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>

#include "berth/oci/digest.hpp"

namespace berth::storage {

class BlobStore;
class FillingBlob;

struct WriteLimits {
    std::uint64_t expected_size = 0;  // announced by the sender (0: unknown); checked against the two below
    std::uint64_t max_bytes = 0;      // 0: none
    std::uint64_t keep_free = 0;      // the disk the scratch file is on keeps this much free
};

class BlobWriter {
public:
    BlobWriter(BlobWriter&& other) noexcept;
    BlobWriter& operator=(BlobWriter&&) = delete;
    ~BlobWriter();

    // Throws past max_bytes or expected_size, or when the scratch file cannot take the bytes.
    void write(const char* data, std::size_t size);
    std::uint64_t size() const { return size_; }
    oci::Digest digest() const { return hasher_.peek(); }
    // Readers that follow the bytes as they arrive (the proxy's many clients of one fetch), given
    // expected_size: each write() reports to it; whoever links the blob then calls verified().
    std::shared_ptr<FillingBlob> follow();
    // Verifies the bytes against `expected` (DigestMismatch when they differ) and makes them the
    // blob for their digest: durable before this returns.
    oci::Digest commit(const std::optional<oci::Digest>& expected = std::nullopt);

private:
    friend class BlobStore;
    BlobWriter(BlobStore& store, std::filesystem::path scratch, oci::DigestAlgorithm algorithm, WriteLimits limits);

    BlobStore* store_;
    std::filesystem::path scratch_;
    int fd_;
    oci::Hasher hasher_;
    WriteLimits limits_;
    std::uint64_t size_ = 0;
    std::shared_ptr<FillingBlob> filling_;
    bool committed_ = false;
};

class DigestMismatch : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

}  // namespace berth::storage
