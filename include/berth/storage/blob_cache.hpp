#pragma once
// Blobs whose home is elsewhere (an object store's bucket), kept on the replica's own disk within
// a budget, the least recently used going first. A file comes in only once its bytes were
// verified against its digest, and is served from here with sendfile like the files store's.
// It is emptied at start: nothing in it is synced, so what a crash left is not trusted.
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "berth/oci/digest.hpp"
#include "berth/storage/open_blob.hpp"

namespace berth::storage {

class BlobCache {
public:
    BlobCache(std::filesystem::path dir, std::uint64_t capacity);

    std::optional<OpenBlob> open(const oci::Digest& digest);
    // Keeps a copy of a verified file (hard-linked or copied; the file stays where it is).
    void admit(const std::filesystem::path& verified, const oci::Digest& digest);
    using Sink = std::function<void(const char*, std::size_t)>;
    // Fills the cache with what produce() hands its sink; the bytes must make digest and be
    // `size` long, or nothing is kept (and this throws).
    OpenBlob fill(const oci::Digest& digest, std::uint64_t size, const std::function<void(const Sink&)>& produce);
    void drop(const oci::Digest& digest);

    std::uint64_t capacity() const { return capacity_; }
    std::uint64_t bytes() const;
    std::uint64_t hits() const { return hits_; }
    std::uint64_t misses() const { return misses_; }
    std::uint64_t evictions() const { return evictions_; }

private:
    struct Entry {
        std::uint64_t size;
        std::uint64_t last_use;
    };
    std::filesystem::path file(const oci::Digest& digest) const;
    // Takes `incoming` into account and removes the least recently used until it fits.
    void make_room_locked(std::uint64_t incoming);
    void keep(const oci::Digest& digest, std::uint64_t size);

    std::filesystem::path dir_;
    std::uint64_t capacity_;
    mutable std::mutex mutex_;
    std::unordered_map<std::string, Entry> entries_;  // by digest
    std::uint64_t bytes_ = 0, tick_ = 0;
    std::atomic<std::uint64_t> hits_{0}, misses_{0}, evictions_{0};
};

}  // namespace berth::storage
