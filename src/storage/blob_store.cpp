#include "berth/storage/blob_store.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <system_error>

namespace berth::storage {
namespace fs = std::filesystem;
namespace {

[[noreturn]] void throw_errno(const std::string& what) {
    throw std::system_error(errno, std::generic_category(), what);
}

}  // namespace

void fsync_path(const fs::path& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw_errno("open " + path.string());
    int rc = ::fsync(fd);
    ::close(fd);
    if (rc != 0) throw_errno("fsync " + path.string());
}

BlobStore::BlobStore(fs::path root) : blobs_(root / "blobs"), scratch_(root / "uploads") {
    fs::create_directories(blobs_);
    fs::create_directories(scratch_);
}

fs::path BlobStore::path(const oci::Digest& digest) const {
    const auto& hex = digest.hex();
    return blobs_ / std::string(oci::algorithm_name(digest.algorithm())) / hex.substr(0, 2) / hex;
}

std::optional<std::uint64_t> BlobStore::size(const oci::Digest& digest) const {
    std::error_code ec;
    auto bytes = fs::file_size(path(digest), ec);
    if (ec) return std::nullopt;
    return bytes;
}

void BlobStore::commit(const fs::path& scratch, const oci::Digest& digest) {
    const auto target = path(digest);
    std::error_code ec;
    if (fs::exists(target, ec)) {
        fs::remove(scratch, ec);
        return;
    }
    fsync_path(scratch);
    const auto dir = target.parent_path();
    if (!fs::exists(dir)) {
        fs::create_directories(dir);
        fsync_path(dir.parent_path());
    }
    if (::rename(scratch.c_str(), target.c_str()) != 0) throw_errno("rename to " + target.string());
    fsync_path(dir);
}

bool BlobStore::remove(const oci::Digest& digest) {
    std::error_code ec;
    return fs::remove(path(digest), ec);
}

}  // namespace berth::storage
