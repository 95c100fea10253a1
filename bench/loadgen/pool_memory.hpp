#pragma once
// The memory blob bodies are sent from: mapped from memfds, so that sendfile(2) can send
// the pages without copying them. Allocated before any request and never changed after,
// so the senders read it without a lock.
#include <cstddef>

namespace berth::bench {

// A region mapped from a memfd.
struct FileBacked {
    const unsigned char* base;
    std::size_t length;
    int fd;
};

// `size` bytes mapped from a new memfd (plain memory if that fails); lives as long as the process.
unsigned char* allocate_pool_buffer(std::size_t size);

// The memfd region holding `data`, or null when it is plain memory.
const FileBacked* backing_of(const void* data);

}  // namespace berth::bench
