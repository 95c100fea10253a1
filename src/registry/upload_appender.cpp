#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "berth/oci/error.hpp"
#include "berth/registry/upload.hpp"
#include "upload_table.hpp"

namespace berth::registry {

UploadAppender::UploadAppender(std::shared_ptr<UploadState> state, UploadTable& table, std::uint64_t max_bytes)
    : state_(std::move(state)), table_(table), max_bytes_(max_bytes) {}

UploadAppender::~UploadAppender() { table_.release(state_); }

std::uint64_t UploadAppender::offset() const { return state_->offset; }

void UploadAppender::write(const void* data, std::size_t size) {
    if (max_bytes_ && state_->offset + size > max_bytes_)
        throw oci::Error(oci::ErrorCode::size_invalid, "blob exceeds the maximum size of an upload");
    table_.require_space(size);
    auto* bytes = static_cast<const char*>(data);
    std::size_t done = 0;
    while (done < size) {
        auto n = ::pwrite(state_->fd, bytes + done, size - done, static_cast<off_t>(state_->offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int saved = errno;
            // Keep file and hash state in step: drop the part of this write that landed.
            if (::ftruncate(state_->fd, static_cast<off_t>(state_->offset)) != 0) {}
            throw std::system_error(saved, std::generic_category(), "write upload file");
        }
        done += static_cast<std::size_t>(n);
    }
    state_->hasher->update(data, size);
    // Start writing back each finished 8 MiB now, so the fsync at commit
    // waits for little more than the tail instead of the whole blob.
    constexpr std::uint64_t writeback = 8 << 20;
    const auto before = state_->offset / writeback, after = (state_->offset + size) / writeback;
    if (after > before)
        ::sync_file_range(state_->fd, static_cast<off_t>(before * writeback),
                          static_cast<off_t>((after - before) * writeback), SYNC_FILE_RANGE_WRITE);
    state_->offset += size;
}

}  // namespace berth::registry
