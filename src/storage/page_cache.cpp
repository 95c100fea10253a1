#include "berth/storage/page_cache.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <memory>
#include <vector>

namespace berth::storage {

namespace {

std::uint64_t page_size() {
    static const auto size = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    return size;
}

// cachestat(2), Linux 6.5: one call that counts the cached pages of a range.
// Declared here because Debian 12's kernel headers predate it.
constexpr long cachestat_syscall = 451;  // the same number on every architecture
struct CachestatRange {
    std::uint64_t offset, length;
};
struct Cachestat {
    std::uint64_t cached, dirty, writeback, evicted, recently_evicted;
};
std::atomic<bool> cachestat_missing{false};  // an older kernel, or a seccomp profile that refuses it

// Whether cachestat answered; `cached` then says if the whole range is in the cache.
bool cachestat_says(int fd, std::uint64_t offset, std::uint64_t length, bool& cached) {
    if (cachestat_missing.load(std::memory_order_relaxed)) return false;
    CachestatRange range{offset, length};
    Cachestat stat{};
    if (::syscall(cachestat_syscall, fd, &range, &stat, 0) != 0) {
        if (errno == ENOSYS || errno == EPERM) cachestat_missing = true;
        return false;
    }
    const auto page = page_size();
    cached = stat.cached >= (offset + length - 1) / page - offset / page + 1;
    return true;
}

}  // namespace

// The same from mincore(2) over a mapping of the range that is never touched:
// about a hundred times slower (a page-cache lookup per page), found everywhere.
bool mincore_says_cached(int fd, std::uint64_t offset, std::uint64_t length) {
    const auto page = page_size();
    const auto start = offset / page * page;
    const auto span = static_cast<std::size_t>(offset + length - start);
    void* map = ::mmap(nullptr, span, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(start));
    if (map == MAP_FAILED) return false;
    // One byte a page; thread_local so a check allocates nothing once warm.
    thread_local std::vector<unsigned char> pages;
    pages.resize((span + page - 1) / page);
    const bool known = ::mincore(map, span, pages.data()) == 0;
    ::munmap(map, span);
    return known && std::all_of(pages.begin(), pages.end(), [](unsigned char bits) { return bits & 1; });
}

bool in_page_cache(int fd, std::uint64_t offset, std::uint64_t length) {
    if (length == 0) return true;
    bool cached = false;
    return cachestat_says(fd, offset, length, cached) ? cached : mincore_says_cached(fd, offset, length);
}

void load_into_page_cache(int fd, std::uint64_t offset, std::uint64_t length, std::uint64_t ahead) {
    // The whole range at once keeps the disk's queue full, rather than one
    // readahead window after another as the reads below would.
    ::posix_fadvise(fd, static_cast<off_t>(offset), static_cast<off_t>(length + ahead), POSIX_FADV_WILLNEED);
    constexpr std::size_t piece = 256 * 1024;
    thread_local std::unique_ptr<char[]> scratch(new char[piece]);
    for (std::uint64_t done = 0; done < length;) {
        const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(piece, length - done));
        const auto n = ::pread(fd, scratch.get(), want, static_cast<off_t>(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;  // the send that follows meets the same error and reports it
        done += static_cast<std::uint64_t>(n);
    }
}

}  // namespace berth::storage
