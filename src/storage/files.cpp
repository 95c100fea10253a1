#include "files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace berth::storage {

void fsync_path(const std::filesystem::path& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw std::system_error(errno, std::generic_category(), "open " + path.string());
    int rc = ::fsync(fd);
    ::close(fd);
    if (rc != 0) throw std::system_error(errno, std::generic_category(), "fsync " + path.string());
}

std::optional<OpenBlob> open_file(const std::filesystem::path& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    struct stat info {};
    if (::fstat(fd, &info) != 0) {
        ::close(fd);
        return std::nullopt;
    }
    return OpenBlob(fd, static_cast<std::uint64_t>(info.st_size));
}

}  // namespace berth::storage
