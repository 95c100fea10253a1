#pragma once
// Receive buffers for upload pipelines, of one size per pool (a page
// multiple, page-aligned for O_DIRECT), mapped from the kernel directly.
// Returned buffers wait for the next upload up to a limit; the rest are
// unmapped at once. (From malloc, a buffer taken on one thread and freed on
// another stayed in the allocator's per-thread arenas, and a burst of pushes
// left tens of MiB behind for good.)
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace berth::storage {

class UploadBuffers {
public:
    UploadBuffers(std::size_t buffer_bytes, std::size_t keep_bytes)
        : buffer_bytes_(buffer_bytes), keep_(keep_bytes / buffer_bytes) {}
    std::size_t buffer_bytes() const { return buffer_bytes_; }
    ~UploadBuffers();
    UploadBuffers(const UploadBuffers&) = delete;
    UploadBuffers& operator=(const UploadBuffers&) = delete;

    struct GiveBack {
        UploadBuffers* pool;
        void operator()(char* bytes) const { pool->give_back(bytes); }
    };
    using Buffer = std::unique_ptr<char[], GiveBack>;

    Buffer take();  // throws std::bad_alloc

private:
    void give_back(char* bytes);

    const std::size_t buffer_bytes_;
    std::mutex mutex_;
    std::vector<char*> spare_;
    std::size_t keep_;  // buffers
};

}  // namespace berth::storage
