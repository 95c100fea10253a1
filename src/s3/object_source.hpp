#pragma once
// An object read at explicit offsets (an OpenBlob's source): each miss is one ranged GET of at
// least a read-ahead's worth, so a sequential reader costs one request per read-ahead, not per
// piece it sends.
#include <mutex>
#include <string>
#include <vector>

#include "berth/s3/client.hpp"
#include "berth/storage/open_blob.hpp"

namespace berth::s3 {

class ObjectSource : public storage::BlobSource {
public:
    static constexpr std::size_t read_ahead = 8 << 20;

    ObjectSource(Client& client, std::string key) : client_(client), key_(std::move(key)) {}
    std::size_t read(std::uint64_t offset, std::span<char> into) const override;
    std::string party() const override { return s3_party; }

private:
    Client& client_;
    const std::string key_;
    mutable std::mutex mutex_;
    mutable std::vector<char> buffer_;
    mutable std::uint64_t buffer_offset_ = 0;
};

}  // namespace berth::s3
