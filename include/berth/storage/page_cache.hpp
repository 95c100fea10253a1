#pragma once
// Blob GETs send file pages with sendfile(2) from an I/O thread. A page that
// is not in the page cache makes that call wait for the disk, and every other
// connection of the thread with it; freshly pushed blobs are never cached
// (uploads bypass the cache). These let the I/O thread ask first and leave
// the waiting to a worker.
#include <cstdint>

namespace berth::storage {

// Whether every page of [offset, offset + length) of the file is in the page
// cache. Cheap enough for an I/O thread: cachestat(2) where the kernel has
// it, else mincore(2) on a mapping of the range. False when it cannot tell.
bool in_page_cache(int fd, std::uint64_t offset, std::uint64_t length);
// What in_page_cache falls back to on kernels without cachestat(2); declared
// so its test runs on newer ones too.
bool mincore_says_cached(int fd, std::uint64_t offset, std::uint64_t length);

// Reads [offset, offset + length) into the page cache and returns once it is
// there; also starts the kernel reading the `ahead` bytes after it, without
// waiting. Blocks on the disk: for worker threads.
void load_into_page_cache(int fd, std::uint64_t offset, std::uint64_t length, std::uint64_t ahead);

}  // namespace berth::storage
