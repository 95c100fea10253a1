#pragma once
// The one way blob bytes are hashed and read whole: scrub, backups, export and uploads all
// come here, whatever store holds the bytes.
#include <cstdint>
#include <functional>
#include <optional>

#include "berth/oci/digest.hpp"
#include "berth/storage/open_blob.hpp"

namespace berth::storage {

struct Hashed {
    oci::Digest digest;
    std::uint64_t size;
};

// Feeds the blob's bytes from its start to hasher and returns how many there were; `each` as below.
std::optional<std::uint64_t> feed(const OpenBlob& blob, oci::Hasher& hasher,
                                  const std::function<bool(const char*, std::size_t)>& each = {});
// Reads the blob from its start through a hasher. `each` sees every piece after it is hashed and
// may copy it, pace the reading, or return false to stop (then: nullopt). Throws on read errors.
std::optional<Hashed> hash(const OpenBlob& blob, oci::DigestAlgorithm algorithm,
                           const std::function<bool(const char*, std::size_t)>& each = {});
// Hands every byte of the blob to sink, in pieces.
void read_all(const OpenBlob& blob, const std::function<void(const char*, std::size_t)>& sink);

}  // namespace berth::storage
