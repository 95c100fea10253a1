#include "berth/storage/open_blob.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "berth/storage/filling_blob.hpp"

namespace berth::storage {

OpenBlob::OpenBlob(int fd, std::uint64_t size, std::shared_ptr<FillingBlob> filling)
    : fd_(fd), size_(size), filling_(std::move(filling)) {}

OpenBlob::OpenBlob(std::shared_ptr<const BlobSource> source, std::uint64_t size)
    : size_(size), source_(std::move(source)) {}

OpenBlob::~OpenBlob() {
    if (fd_ >= 0) ::close(fd_);
}

std::size_t OpenBlob::read(std::uint64_t offset, std::span<char> into) const {
    if (offset >= size_) return 0;
    if (into.size() > size_ - offset) into = into.first(static_cast<std::size_t>(size_ - offset));
    if (source_) return source_->read(offset, into);
    std::size_t done = 0;
    while (done < into.size()) {
        auto n = ::pread(fd_, into.data() + done, into.size() - done, static_cast<off_t>(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw std::system_error(errno, std::generic_category(), "read a blob");
        if (n == 0) break;
        done += static_cast<std::size_t>(n);
    }
    return done;
}

OpenBlob OpenBlob::another(std::shared_ptr<FillingBlob> filling) const {
    if (source_) {
        OpenBlob copy(source_, size_);
        copy.filling_ = std::move(filling);
        return copy;
    }
    int fd = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) throw std::system_error(errno, std::generic_category(), "open a blob again");
    return OpenBlob(fd, size_, std::move(filling));
}

}  // namespace berth::storage
