#include "berth/storage/blob_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "berth/storage/blob_store.hpp"
#include "berth/storage/filling_blob.hpp"

namespace berth::storage {
namespace {
[[noreturn]] void throw_errno(const std::string& what) {
    throw std::system_error(errno, std::generic_category(), what);
}
}  // namespace

BlobWriter::BlobWriter(BlobStore& store, std::filesystem::path scratch, oci::DigestAlgorithm algorithm,
                       WriteLimits limits)
    : store_(&store), scratch_(std::move(scratch)), fd_(-1), hasher_(algorithm), limits_(limits) {
    if (limits_.max_bytes && limits_.expected_size > limits_.max_bytes)
        throw std::runtime_error("blob larger than the limit of " + std::to_string(limits_.max_bytes) + " bytes");
    if ((limits_.expected_size || limits_.keep_free) && store.free_bytes() < limits_.expected_size + limits_.keep_free)
        throw std::runtime_error("not enough free disk space");
    fd_ = ::open(scratch_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    if (fd_ < 0) throw_errno("create a scratch file");
}

BlobWriter::BlobWriter(BlobWriter&& other) noexcept
    : store_(other.store_), scratch_(std::move(other.scratch_)), fd_(std::exchange(other.fd_, -1)),
      hasher_(other.hasher_), limits_(other.limits_), size_(other.size_), filling_(std::move(other.filling_)),
      committed_(std::exchange(other.committed_, true)) {}

BlobWriter::~BlobWriter() {
    if (fd_ >= 0) ::close(fd_);
    if (committed_) return;
    std::error_code ec;
    std::filesystem::remove(scratch_, ec);
}

void BlobWriter::write(const char* data, std::size_t size) {
    if (limits_.max_bytes && size_ + size > limits_.max_bytes)
        throw std::runtime_error("blob larger than the limit of " + std::to_string(limits_.max_bytes) + " bytes");
    if (limits_.expected_size && size_ + size > limits_.expected_size)
        throw std::runtime_error("blob longer than its announced size");
    hasher_.update(data, size);
    for (std::size_t done = 0; done < size;) {
        auto n = ::write(fd_, data + done, size - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw_errno("write a scratch file");
        done += static_cast<std::size_t>(n);
    }
    size_ += size;
    if (filling_) filling_->wrote(size_);
}

std::shared_ptr<FillingBlob> BlobWriter::follow() {
    if (!filling_) {
        int fd = ::open(scratch_.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) throw_errno("open a scratch file");
        filling_ = std::make_shared<FillingBlob>(OpenBlob(fd, limits_.expected_size));
    }
    return filling_;
}

oci::Digest BlobWriter::commit(const std::optional<oci::Digest>& expected) {
    if (limits_.expected_size && size_ != limits_.expected_size)
        throw std::runtime_error("blob shorter than its announced size");
    auto digest = hasher_.peek();
    if (expected && digest != *expected)
        throw DigestMismatch("blob " + expected->str() + " holds bytes of " + digest.str());
    store_->commit(scratch_, digest, fd_);  // fsyncs before the blob is visible
    ::close(std::exchange(fd_, -1));
    committed_ = true;
    return digest;
}

}  // namespace berth::storage
