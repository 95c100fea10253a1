#pragma once
// A blob still arriving, which readers follow as it grows: one writer appends
// to a scratch file, any number of readers send what is there and wait for
// more. The last byte is held back until the digest is verified, so no reader
// ever gets a complete body whose bytes were wrong: a failed fetch cuts every
// reader short instead.
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "berth/storage/open_blob.hpp"

namespace berth::storage {

class FillingBlob : public std::enable_shared_from_this<FillingBlob> {
public:
    // blob: the bytes as they arrive (a scratch file opened for reading), or all of them already.
    explicit FillingBlob(OpenBlob blob);
    FillingBlob(const FillingBlob&) = delete;
    FillingBlob& operator=(const FillingBlob&) = delete;

    std::uint64_t size() const { return blob_.size(); }
    // The bytes for one more reader, who reads only what readable() says; valid after the
    // scratch file is renamed into place.
    OpenBlob reader();
    // Bytes from the start that readers may send.
    std::uint64_t readable() const;
    bool failed() const;
    // Runs `more` once readable() > offset or the fetch failed: at once (on
    // this thread) if that is so already, else on the writer's thread.
    void when_readable(std::uint64_t offset, std::function<void()> more);

    // The writer's side.
    void wrote(std::uint64_t total);
    void verified();
    void fail();

private:
    std::uint64_t can_read_locked() const;
    // Applies update under the lock, then wakes the readers it made due.
    void change(const std::function<void()>& update);
    std::vector<std::function<void()>> take_waiters_locked();

    const OpenBlob blob_;
    mutable std::mutex mutex_;
    std::uint64_t written_ = 0;
    bool verified_ = false, failed_ = false;
    std::vector<std::pair<std::uint64_t, std::function<void()>>> waiters_;
};

}  // namespace berth::storage
