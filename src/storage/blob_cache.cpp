#include "berth/storage/blob_cache.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <system_error>

#include "berth/oci/encoding.hpp"
#include "berth/storage/blob_hash.hpp"
#include "berth/storage/blob_writer.hpp"
#include "files.hpp"

namespace berth::storage {
namespace fs = std::filesystem;

BlobCache::BlobCache(fs::path dir, std::uint64_t capacity) : dir_(std::move(dir)), capacity_(capacity) {
    // Nothing here is fsynced (it is a copy): after a crash a file may hold what its name does
    // not promise, so the cache starts empty.
    std::error_code ec;
    fs::remove_all(dir_, ec);
    fs::create_directories(dir_);
}

fs::path BlobCache::file(const oci::Digest& digest) const {
    return dir_ / (std::string(oci::algorithm_name(digest.algorithm())) + "-" + digest.hex());
}

std::uint64_t BlobCache::bytes() const {
    std::lock_guard lock(mutex_);
    return bytes_;
}

std::optional<OpenBlob> BlobCache::open(const oci::Digest& digest) {
    {
        std::lock_guard lock(mutex_);
        auto it = entries_.find(digest.str());
        if (it == entries_.end()) {
            ++misses_;
            return std::nullopt;
        }
        it->second.last_use = ++tick_;
    }
    auto blob = open_file(file(digest));
    if (!blob) {  // removed behind our back
        drop(digest);
        ++misses_;
        return std::nullopt;
    }
    ++hits_;
    return blob;
}

void BlobCache::make_room_locked(std::uint64_t incoming) {
    while (!entries_.empty() && bytes_ + incoming > capacity_) {
        auto oldest = entries_.begin();
        for (auto it = entries_.begin(); it != entries_.end(); ++it)
            if (it->second.last_use < oldest->second.last_use) oldest = it;
        std::error_code ec;
        fs::remove(file(*oci::Digest::parse(oldest->first)), ec);  // a reader's descriptor stays valid
        bytes_ -= oldest->second.size;
        entries_.erase(oldest);
        ++evictions_;
    }
}

void BlobCache::keep(const oci::Digest& digest, std::uint64_t size) {
    std::lock_guard lock(mutex_);
    if (entries_.count(digest.str())) return;
    make_room_locked(size);
    entries_[digest.str()] = {size, ++tick_};
    bytes_ += size;
}

void BlobCache::admit(const fs::path& verified, const oci::Digest& digest) {
    std::error_code ec;
    const auto size = fs::file_size(verified, ec);
    if (ec || size > capacity_ / 2) return;  // one blob never takes the whole cache
    const auto target = file(digest);
    if (::link(verified.c_str(), target.c_str()) != 0 && errno != EEXIST) return;
    keep(digest, size);
}

OpenBlob BlobCache::fill(const oci::Digest& digest, std::uint64_t size,
                         const std::function<void(const Sink&)>& produce) {
    const auto partial = dir_ / (".fill-" + oci::random_hex(8));
    struct Partial {
        const fs::path& path;
        ~Partial() {
            std::error_code ec;
            fs::remove(path, ec);
        }
    } cleanup{partial};
    int fd = ::open(partial.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    if (fd < 0) throw std::system_error(errno, std::generic_category(), "create a cache file");
    OpenBlob blob(fd, size);
    oci::Hasher hasher(digest.algorithm());
    std::uint64_t got = 0;
    produce([&](const char* data, std::size_t n) {
        if (got + n > size) throw std::runtime_error("blob " + digest.str() + " is longer than its size");
        hasher.update(data, n);
        for (std::size_t done = 0; done < n;) {
            auto w = ::pwrite(fd, data + done, n - done, static_cast<off_t>(got + done));
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) throw std::system_error(errno, std::generic_category(), "write a cache file");
            done += static_cast<std::size_t>(w);
        }
        got += n;
    });
    if (got != size || hasher.peek() != digest)
        throw DigestMismatch("blob " + digest.str() + " read from the store does not match its digest");
    if (size <= capacity_ / 2 && ::rename(partial.c_str(), file(digest).c_str()) == 0) keep(digest, size);
    return blob;
}

void BlobCache::drop(const oci::Digest& digest) {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(digest.str());
    if (it == entries_.end()) return;
    std::error_code ec;
    fs::remove(file(digest), ec);
    bytes_ -= it->second.size;
    entries_.erase(it);
}

}  // namespace berth::storage
