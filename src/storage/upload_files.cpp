#include "berth/storage/upload_files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "berth/storage/blob_hash.hpp"
#include "berth/storage/blob_store.hpp"
#include "berth/storage/layout.hpp"
#include "files.hpp"

namespace berth::storage {
namespace fs = std::filesystem;
namespace {

[[noreturn]] void throw_errno(const std::string& what) {
    throw std::system_error(errno, std::generic_category(), what);
}

OpenBlob open_whole(const fs::path& path) {
    auto file = open_file(path);
    if (!file) throw_errno("open upload file");
    return std::move(*file);
}

}  // namespace

UploadFiles::UploadFiles(BlobStore& blobs) : blobs_(blobs) {}

fs::path UploadFiles::path(const std::string& id) const { return layout::upload_file(blobs_.scratch_dir(), id); }

bool UploadFiles::exists(const std::string& id) const { return fs::exists(path(id)); }

void UploadFiles::sweep(const std::function<bool(const std::string& id)>& keep) {
    std::error_code ec;
    for (auto& entry : fs::directory_iterator(blobs_.scratch_dir(), ec))
        if (!layout::is_fetch_file(entry.path()) && !keep(entry.path().filename().string()))
            fs::remove(entry.path(), ec);
}

void UploadFiles::make(UploadFile& file) {
    file.fd = ::open(path(file.id).c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (file.fd < 0) throw_errno("create upload file");
}

bool UploadFiles::open(UploadFile& file, oci::DigestAlgorithm algorithm) {
    file.fd = ::open(path(file.id).c_str(), O_RDWR | O_CLOEXEC);
    if (file.fd < 0 && errno == ENOENT) return false;
    if (file.fd < 0) throw_errno("open upload file");
    if (!file.hasher) {
        // After a restart: the file's bytes are the session's.
        oci::Hasher hasher(algorithm);
        file.offset = *feed(open_whole(path(file.id)), hasher);
        file.hasher.emplace(hasher);
    }
    return true;
}

void UploadFiles::close(UploadFile& file) {
    if (file.fd >= 0) ::close(file.fd);
    file.fd = -1;
}

void UploadFiles::remove(UploadFile& file) {
    close(file);
    if (!file.committed) remove(file.id);
}

void UploadFiles::remove(const std::string& id) {
    std::error_code ec;
    fs::remove(path(id), ec);
}

oci::Digest UploadFiles::digest(const UploadFile& file, oci::DigestAlgorithm algorithm) const {
    return hash(open_whole(path(file.id)), algorithm)->digest;
}

void UploadFiles::sync(const UploadFile& file) {
    if (::fsync(file.fd) != 0) throw_errno("fsync upload file");
}

void UploadFiles::commit(UploadFile& file, const oci::Digest& digest) {
    blobs_.commit(path(file.id), digest, file.fd);
    file.committed = true;
}

}  // namespace berth::storage
