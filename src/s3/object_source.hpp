#pragma once
// An object read at explicit offsets (an OpenBlob's source): each miss is one ranged GET of at
// least a read-ahead's worth, so a sequential reader costs one request per read-ahead, not per
// piece it sends. Bytes read in order from the start are hashed, and the piece holding the last
// byte is given only once the whole matches the digest: a body read whole from the bucket is
// never complete with the wrong bytes (an object replaced behind berth's back), it is cut short.
#include <mutex>
#include <string>

#include "berth/oci/digest.hpp"
#include "berth/s3/client.hpp"
#include "berth/storage/open_blob.hpp"
#include "mapped_buffer.hpp"

namespace berth::s3 {

class ObjectSource : public storage::BlobSource {
public:
    static constexpr std::size_t read_ahead = 8 << 20;

    ObjectSource(Client& client, std::string key, const oci::Digest& digest, std::uint64_t size)
        : client_(client), key_(std::move(key)), digest_(digest), size_(size), hasher_(digest.algorithm()) {}
    std::size_t read(std::uint64_t offset, std::span<char> into) const override;
    std::string party() const override { return s3_party; }

private:
    Client& client_;
    const std::string key_;
    const oci::Digest digest_;
    const std::uint64_t size_;
    mutable std::mutex mutex_;
    mutable oci::Hasher hasher_;
    mutable std::uint64_t hashed_ = 0;  // bytes from the start handed out in order, and hashed
    mutable MappedBuffer buffer_;       // read_ahead bytes, mapped on the first read
    mutable std::size_t buffered_ = 0;  // of them, what the last GET filled
    mutable std::uint64_t buffer_offset_ = 0;
};

}  // namespace berth::s3
