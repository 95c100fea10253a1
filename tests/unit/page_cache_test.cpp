#include <fcntl.h>
#include <linux/magic.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "berth/storage/page_cache.hpp"
#include "temp_dir.hpp"

using namespace berth::storage;

namespace {

// Both ways of asking must agree; the answer is the cachestat one where the kernel has it.
bool cached(int fd, std::uint64_t offset, std::uint64_t length) {
    const bool answer = in_page_cache(fd, offset, length);
    CHECK(mincore_says_cached(fd, offset, length) == answer);
    return answer;
}

}  // namespace

TEST_CASE("page-cache checks see evicted pages, and loading brings them back") {
    TempDir dir;
    const auto path = (dir.path() / "blob").string();
    const std::size_t size = 6 << 20;  // over a 4 MiB send window, and not a whole number of pages
    const std::string bytes(size - 123, 'b');
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    REQUIRE(fd >= 0);
    REQUIRE(::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
    REQUIRE(::fsync(fd) == 0);
    // Not checked: that the pages just written are still cached. The kernel may
    // reclaim clean pages at any moment (this machine runs DAMON reclaim), and
    // did, in one CI run in three.
    CHECK(in_page_cache(fd, 5000, 0));  // an empty range

    struct statfs fs {};
    REQUIRE(::fstatfs(fd, &fs) == 0);
    // tmpfs keeps every page in memory: nothing to evict there.
    if (fs.f_type != TMPFS_MAGIC) {
        REQUIRE(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0);
        CHECK_FALSE(cached(fd, 0, bytes.size()));
        CHECK_FALSE(cached(fd, 4097, 100));  // an unaligned range inside one evicted page
    }

    load_into_page_cache(fd, 4097, 3 << 20, 0);
    CHECK(cached(fd, 4096, 3 << 20));                    // the loaded range, from its first page
    CHECK(cached(fd, 4097 + (3 << 20) - 1, 1));          // its last byte
    load_into_page_cache(fd, 0, bytes.size(), 1 << 20);  // ahead of the end of the file is harmless
    CHECK(cached(fd, 0, bytes.size()));
    ::close(fd);
}
