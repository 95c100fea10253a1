#pragma once
// A blob opened for reading. A files store hands out a descriptor (sendfile, the page cache); a
// store without one (an object store) hands out a source read at explicit offsets. Either way
// read() works, so only the HTTP sender needs to know which it has.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>

namespace berth::storage {

class FillingBlob;

// Bytes read at explicit offsets from somewhere other than a local descriptor.
class BlobSource {
public:
    virtual ~BlobSource() = default;
    // Blocking; returns 0 only at the end; throws when the bytes cannot be had.
    virtual std::size_t read(std::uint64_t offset, std::span<char> into) const = 0;
    // The outside party reads wait on (net/reach.hpp's names): they run on its pool.
    virtual std::string party() const = 0;
};

class OpenBlob {
public:
    // Takes fd (closed with this). With `filling`, the file is still arriving: read only what
    // filling->readable() says.
    OpenBlob(int fd, std::uint64_t size, std::shared_ptr<FillingBlob> filling = nullptr);
    OpenBlob(std::shared_ptr<const BlobSource> source, std::uint64_t size);
    OpenBlob(OpenBlob&& other) noexcept
        : fd_(std::exchange(other.fd_, -1)), size_(other.size_), source_(std::move(other.source_)),
          filling_(std::move(other.filling_)) {}
    OpenBlob& operator=(OpenBlob&&) = delete;
    ~OpenBlob();

    std::uint64_t size() const { return size_; }
    const std::shared_ptr<FillingBlob>& filling() const { return filling_; }
    // >= 0: a local file, read only at explicit offsets (pread, sendfile); -1: read() only.
    int fd() const { return fd_; }
    // Blocking, like pread: fewer bytes than asked only at the end (0 there). Throws on failure.
    std::size_t read(std::uint64_t offset, std::span<char> into) const;
    // The party read() waits on; "" for a local file.
    std::string party() const { return source_ ? source_->party() : std::string(); }
    // Another handle on the same bytes, for one more reader.
    OpenBlob another(std::shared_ptr<FillingBlob> filling) const;

private:
    int fd_ = -1;
    std::uint64_t size_;
    std::shared_ptr<const BlobSource> source_;
    std::shared_ptr<FillingBlob> filling_;
};

}  // namespace berth::storage
