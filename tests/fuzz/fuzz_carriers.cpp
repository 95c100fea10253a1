// What berth import reads from a carrier it was handed: tar archives (indexed by their headers)
// and the names in them. Invariants: a malformed archive is a std::runtime_error and nothing
// else; every entry found lies inside the archive; a name berth accepts is a valid repository
// name and tag.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "berth/oci/names.hpp"
#include "fuzz_check.hpp"
#include "transfer/names.hpp"
#include "transfer/tar.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace berth;
    const std::string text(reinterpret_cast<const char*>(data), size);

    int fd = memfd_create("carrier", MFD_CLOEXEC);
    FUZZ_CHECK(fd >= 0);
    FUZZ_CHECK(::write(fd, data, size) == static_cast<ssize_t>(size));
    try {
        transfer::TarIndex index("/proc/self/fd/" + std::to_string(fd));
        for (auto* name : {"index.json", "manifest.json", "oci-layout", "blobs/sha256/x", "a"})
            if (auto entry = index.find(name)) FUZZ_CHECK(entry->offset + entry->size <= size);
    } catch (const std::runtime_error&) {
        // refused as not a tar archive berth can read
    }
    ::close(fd);

    if (size <= 512) {
        if (auto name = transfer::parse_image_name(text)) {
            FUZZ_CHECK(!name->repository.empty() || !name->tag.empty());
            if (!name->repository.empty()) FUZZ_CHECK(oci::valid_repository_name(name->repository));
            if (!name->tag.empty()) FUZZ_CHECK(oci::valid_tag(name->tag));
        }
    }
    return 0;
}
