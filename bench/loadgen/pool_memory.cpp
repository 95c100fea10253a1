// Blob pool buffers mapped from memfds, and the lookup that lets a sender use sendfile(2) on them.
#include "pool_memory.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

namespace berth::bench {

namespace {

std::vector<FileBacked> file_backed;

}  // namespace

unsigned char* allocate_pool_buffer(std::size_t size) {
    const std::size_t length = std::max<std::size_t>(size, 1);
    int fd = ::memfd_create("berth-bench-pool", MFD_CLOEXEC);
    if (fd >= 0 && ::ftruncate(fd, static_cast<off_t>(length)) == 0) {
        void* map = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (map != MAP_FAILED) {
            file_backed.push_back({static_cast<unsigned char*>(map), length, fd});
            return static_cast<unsigned char*>(map);
        }
    }
    if (fd >= 0) ::close(fd);
    return new unsigned char[length];
}

const FileBacked* backing_of(const void* data) {
    auto* p = static_cast<const unsigned char*>(data);
    for (auto& region : file_backed)
        if (p >= region.base && p < region.base + region.length) return &region;
    return nullptr;
}

}  // namespace berth::bench
