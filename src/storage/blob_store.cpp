#include "berth/storage/blob_store.hpp"
#include "berth/storage/crash_points.hpp"
#include "berth/oci/error.hpp"
#include "berth/storage/layout.hpp"
#include "files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <shared_mutex>
#include <stdexcept>
#include <string>
#include <system_error>

namespace berth::storage {
namespace fs = std::filesystem;
namespace {

[[noreturn]] void throw_errno(const std::string& what) {
    throw std::system_error(errno, std::generic_category(), what);
}

void make_dir(const fs::path& dir) {
    if (::mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST) throw_errno("mkdir " + dir.string());
}

// Every <alg>/<2 hex> folder, made and fsynced into its parent before any commit. A commit then
// renames into a folder whose own entry is already durable: two commits racing to make a new
// prefix folder could otherwise answer one of them before the other had fsynced the entry.
void make_prefix_dirs(const fs::path& blobs) {
    constexpr char hex[] = "0123456789abcdef";
    make_dir(blobs);
    for (auto algorithm : {oci::DigestAlgorithm::sha256, oci::DigestAlgorithm::sha512}) {
        const auto dir = blobs / std::string(oci::algorithm_name(algorithm));
        make_dir(dir);
        for (int i = 0; i < 256; ++i) make_dir(dir / std::string{hex[i >> 4], hex[i & 15]});
        fsync_path(dir);
    }
    fsync_path(blobs);
    fsync_path(blobs.has_parent_path() ? blobs.parent_path() : fs::path("."));
}

}  // namespace

BlobStore::BlobStore(const fs::path& root, StoreUse use) : scratch_(layout::scratch_dir(root)) {
    fs::create_directories(scratch_);
    if (use == StoreUse::beside) return;
    std::error_code ec;
    for (auto& entry : fs::directory_iterator(scratch_, ec))
        if (layout::is_fetch_file(entry.path())) fs::remove(entry.path(), ec);
}

std::optional<std::string> BlobStore::read(const oci::Digest& digest, std::uint64_t limit) const {
    auto blob = open(digest);
    if (!blob || blob->size() > limit) return std::nullopt;
    std::string bytes(blob->size(), '\0');
    try {
        if (blob->read(0, bytes) != bytes.size()) return std::nullopt;
    } catch (const DigestMismatch&) {
        return std::nullopt;  // damaged: as good as absent (scrub deals with it)
    } catch (const oci::Error&) {
        throw;
    } catch (const std::exception& error) {
        // Unreadable now (a bucket that failed mid-read): not an absence a caller may judge on.
        throw oci::Error(oci::ErrorCode::unavailable, std::string("could not read a blob: ") + error.what());
    }
    return bytes;
}

OpenBlob BlobStore::open_scratch(const fs::path& scratch) {
    auto blob = open_file(scratch);
    if (!blob) throw_errno("open " + scratch.string());
    return std::move(*blob);
}

void BlobStore::drop_scratch(const fs::path& scratch) {
    std::error_code ec;
    fs::remove(scratch, ec);
}

BlobWriter BlobStore::write(oci::DigestAlgorithm algorithm, WriteLimits limits) {
    return BlobWriter(*this, layout::fetch_file(scratch_), algorithm, limits);
}

std::uint64_t BlobStore::free_bytes() const {
    struct statvfs info {};
    if (::statvfs(scratch_.c_str(), &info) != 0) return UINT64_MAX;  // unknown: do not refuse on a guess
    return static_cast<std::uint64_t>(info.f_bavail) * info.f_frsize;
}

FileBlobStore::FileBlobStore(const fs::path& root, StoreUse use)
    : BlobStore(root, use), blobs_(layout::blobs_dir(root)), quarantine_(layout::quarantine_dir(root)) {
    if (use == StoreUse::owner) make_prefix_dirs(blobs_);
    tree_durable_ = use == StoreUse::owner;  // beside one, its first commit would make it
}

bool FileBlobStore::holds_blobs(const fs::path& root) {
    std::error_code ec;
    for (fs::recursive_directory_iterator it(layout::blobs_dir(root), ec), end; !ec && it != end; it.increment(ec))
        if (it->is_regular_file(ec)) return true;
    return false;
}

fs::path FileBlobStore::set_aside(const fs::path& root) {
    auto aside = layout::blobs_set_aside_dir(root, std::chrono::system_clock::now());
    // Another set aside in the same second (or a clock set back): a name of its own, never over it.
    for (int n = 1; fs::exists(aside); ++n)
        aside = layout::blobs_set_aside_dir(root, std::chrono::system_clock::now()).string() + "-" + std::to_string(n);
    if (::rename(layout::blobs_dir(root).c_str(), aside.c_str()) != 0) throw_errno("set " + aside.string() + " aside");
    fsync_path(root);
    return aside;
}

fs::path FileBlobStore::path(const oci::Digest& digest) const { return layout::blob_file(blobs_, digest); }

std::optional<OpenBlob> FileBlobStore::open(const oci::Digest& digest) const { return open_file(path(digest)); }

std::optional<std::uint64_t> FileBlobStore::size(const oci::Digest& digest) const {
    std::error_code ec;
    auto bytes = fs::file_size(path(digest), ec);
    if (ec) return std::nullopt;
    return bytes;
}

void FileBlobStore::commit(const fs::path& scratch, const oci::Digest& digest, int scratch_fd) {
    const auto target = path(digest);
    std::error_code ec;
    bool renewed = false;
    {
        // An existing copy is made young again, so garbage collection (which
        // takes only old files, under the same lock) cannot remove it while
        // the caller links it. One of another size was damaged (truncated,
        // emptied): the verified scratch file replaces it below, atomically.
        std::lock_guard lock(collect_mutex_);
        struct stat existing {};
        struct stat verified {};
        renewed = ::stat(target.c_str(), &existing) == 0 && ::stat(scratch.c_str(), &verified) == 0 &&
                  existing.st_size == verified.st_size && ::utimensat(AT_FDCWD, target.c_str(), nullptr, 0) == 0;
    }
    if (renewed) {
        // Its own commit may have failed after the rename (the directory's fsync): durable now.
        // First: a failure here leaves the scratch file for the caller to retry.
        auto tree = durable_tree(target.parent_path());
        fsync_path(target.parent_path());
        fs::remove(scratch, ec);
        return;
    }
    if (scratch_fd < 0) fsync_path(scratch);
    else if (::fsync(scratch_fd) != 0) throw_errno("fsync " + scratch.string());
    crash_point("blob.synced");
    const auto dir = target.parent_path();
    auto tree = durable_tree(dir);
    bool renamed = ::rename(scratch.c_str(), target.c_str()) == 0;
    if (!renamed && errno == ENOENT) {
        // No folder: one removed under a running berth. Made again as at start.
        tree.unlock();
        remake_tree(dir);
        tree = durable_tree(dir);
        renamed = ::rename(scratch.c_str(), target.c_str()) == 0;
    }
    if (!renamed) throw_errno("rename to " + target.string());
    crash_point("blob.renamed");
    fsync_path(dir);
    crash_point("blob.dir_synced");
}

std::shared_lock<std::shared_mutex> FileBlobStore::durable_tree(const fs::path& dir) {
    for (;;) {
        std::shared_lock tree(tree_mutex_);
        if (tree_durable_) return tree;
        tree.unlock();
        remake_tree(dir);  // throws if it fails: no commit goes on without it
    }
}

void FileBlobStore::remake_tree(const fs::path& dir) {
    std::unique_lock alone(tree_mutex_);
    if (tree_durable_ && fs::exists(dir)) return;  // another commit remade it meanwhile
    tree_durable_ = false;                         // until every fsync below has succeeded: a failure leaves it so
    make_prefix_dirs(blobs_);
    tree_durable_ = true;
}

bool FileBlobStore::remove(const oci::Digest& digest) {
    std::error_code ec;
    return fs::remove(path(digest), ec);
}

bool FileBlobStore::touch(const oci::Digest& digest) {
    std::lock_guard lock(collect_mutex_);
    return ::utimensat(AT_FDCWD, path(digest).c_str(), nullptr, 0) == 0;
}

bool FileBlobStore::remove_if_older(const oci::Digest& digest, std::chrono::system_clock::time_point cutoff) {
    std::lock_guard lock(collect_mutex_);
    struct stat info {};
    const auto file = path(digest);
    if (::stat(file.c_str(), &info) != 0) return false;
    if (std::chrono::system_clock::from_time_t(info.st_mtime) >= cutoff) return false;
    return ::unlink(file.c_str()) == 0;
}

bool FileBlobStore::quarantine(const oci::Digest& digest) {
    const auto target = layout::quarantine_file(quarantine_, digest);
    fs::create_directories(quarantine_);
    std::lock_guard lock(collect_mutex_);
    if (::rename(path(digest).c_str(), target.c_str()) != 0) throw_errno("quarantine " + digest.str());
    return false;
}

void FileBlobStore::for_each(
    const std::function<void(const oci::Digest&, std::uint64_t size, std::int64_t mtime)>& visit) const {
    std::error_code ec;
    for (auto& algorithm : fs::directory_iterator(blobs_, ec)) {
        auto alg = oci::parse_algorithm(algorithm.path().filename().string());
        if (!alg) continue;
        for (auto& entry : fs::recursive_directory_iterator(algorithm.path(), ec)) {
            if (!entry.is_regular_file(ec)) continue;
            auto digest =
                oci::Digest::parse(std::string(oci::algorithm_name(*alg)) + ":" + entry.path().filename().string());
            if (!digest) continue;
            struct stat info {};
            if (::stat(entry.path().c_str(), &info) != 0) continue;
            visit(*digest, static_cast<std::uint64_t>(info.st_size), static_cast<std::int64_t>(info.st_mtime));
        }
    }
}

}  // namespace berth::storage
