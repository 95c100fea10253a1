#include "berth/storage/blob_hash.hpp"

#include <stdexcept>
#include <vector>

namespace berth::storage {
namespace {
constexpr std::size_t piece_bytes = 1 << 20;
}

std::optional<std::uint64_t> feed(const OpenBlob& blob, oci::Hasher& hasher,
                                  const std::function<bool(const char*, std::size_t)>& each) {
    std::vector<char> piece(piece_bytes);
    std::uint64_t size = 0;
    while (auto n = blob.read(size, piece)) {
        hasher.update(piece.data(), n);
        size += n;
        if (each && !each(piece.data(), n)) return std::nullopt;
    }
    return size;
}

std::optional<Hashed> hash(const OpenBlob& blob, oci::DigestAlgorithm algorithm,
                           const std::function<bool(const char*, std::size_t)>& each) {
    oci::Hasher hasher(algorithm);
    auto size = feed(blob, hasher, each);
    if (!size) return std::nullopt;
    return Hashed{hasher.peek(), *size};
}

void read_all(const OpenBlob& blob, const std::function<void(const char*, std::size_t)>& sink) {
    std::vector<char> piece(piece_bytes);
    std::uint64_t offset = 0;
    for (; auto n = blob.read(offset, piece); offset += n) sink(piece.data(), n);
    if (offset != blob.size()) throw std::runtime_error("a blob ended before its size");
}

}  // namespace berth::storage
