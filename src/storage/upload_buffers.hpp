#pragma once
// Receive buffers for upload pipelines: 1 MiB, page-aligned for O_DIRECT,
// mapped from the kernel directly. 1 MiB rather than 256 KiB: a quarter of the
// reads, writes and thread hand-offs per GiB (1.30-1.50 -> 1.12-1.20 server
// CPU-s per GiB for 8 pushes of 100 MiB; bench/RESULTS.md, "CPU floor"). Returned buffers wait for the next upload
// up to a limit; the rest are unmapped at once. (From malloc, a buffer taken
// on one thread and freed on another stayed in the allocator's per-thread
// arenas, and a burst of pushes left tens of MiB behind for good.)
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace berth::storage {

class UploadBuffers {
public:
    static constexpr std::size_t buffer_bytes = 1024 * 1024;

    explicit UploadBuffers(std::size_t keep_bytes) : keep_(keep_bytes / buffer_bytes) {}
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

    std::mutex mutex_;
    std::vector<char*> spare_;
    std::size_t keep_;  // buffers
};

}  // namespace berth::storage
