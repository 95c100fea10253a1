// Files of a directory or a tar archive (files.hpp).
#include "files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace berth::transfer {

namespace {

class DirectoryFiles : public Files {
public:
    explicit DirectoryFiles(std::filesystem::path dir) : dir_(std::move(dir)) {}
    // Names come from the carrier's own index. Each component is opened beneath the carrier's
    // directory without following a symbolic link, so a carrier holding a link (to /etc/passwd, to a
    // secret beside it, to another directory) cannot bring that file in.
    std::optional<FileRange> open_file(const std::string& path) const override {
        int dir = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        std::string_view rest = path;
        while (dir >= 0) {
            const auto slash = rest.find('/');
            const std::string part(rest.substr(0, slash));
            const bool last = slash == std::string_view::npos;
            int fd = part.empty() || part == "." || part == ".."
                         ? -1
                         : ::openat(dir, part.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (last ? 0 : O_DIRECTORY));
            ::close(dir);
            if (fd < 0) return std::nullopt;
            if (!last) {
                dir = fd;
                rest = rest.substr(slash + 1);
                continue;
            }
            struct stat info {};
            if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
                ::close(fd);
                return std::nullopt;
            }
            return FileRange{fd, 0, static_cast<std::uint64_t>(info.st_size)};
        }
        return std::nullopt;
    }
    std::string describe() const override { return dir_.string(); }

private:
    std::filesystem::path dir_;
};

class TarFiles : public Files {
public:
    explicit TarFiles(const std::filesystem::path& archive) : index_(archive) {}
    std::optional<FileRange> open_file(const std::string& path) const override {
        auto entry = index_.find(path);
        if (!entry) return std::nullopt;
        int fd = ::open(index_.archive().c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) return std::nullopt;
        return FileRange{fd, entry->offset, entry->size};
    }
    std::string describe() const override { return index_.archive().string(); }

private:
    TarIndex index_;
};

}  // namespace

std::unique_ptr<Files> Files::open(const std::filesystem::path& source) {
    if (std::filesystem::is_directory(source)) return std::make_unique<DirectoryFiles>(source);
    if (std::filesystem::is_regular_file(source)) return std::make_unique<TarFiles>(source);
    throw std::runtime_error(source.string() + " is neither a directory nor an archive");
}

void read_pieces(const FileRange& file, const std::function<void(const char*, std::size_t)>& sink) {
    std::vector<char> buffer(std::min<std::uint64_t>(1 << 20, std::max<std::uint64_t>(file.size, 1)));
    for (std::uint64_t done = 0; done < file.size;) {
        auto want = static_cast<std::size_t>(std::min<std::uint64_t>(buffer.size(), file.size - done));
        auto n = ::pread(file.fd, buffer.data(), want, static_cast<off_t>(file.offset + done));
        if (n <= 0) throw std::runtime_error("cannot read " + std::to_string(file.size) + " bytes of a file");
        sink(buffer.data(), static_cast<std::size_t>(n));
        done += static_cast<std::uint64_t>(n);
    }
}

bool Files::exists(const std::string& path) const {
    auto file = open_file(path);
    if (file) ::close(file->fd);
    return file.has_value();
}

std::optional<std::string> Files::read(const std::string& path, std::size_t max_bytes) const {
    auto file = open_file(path);
    if (!file) return std::nullopt;
    if (file->size > max_bytes) {
        ::close(file->fd);
        throw std::runtime_error(describe() + ": " + path + " is larger than " + std::to_string(max_bytes) + " bytes");
    }
    std::string out(file->size, '\0');
    std::size_t done = 0;
    while (done < out.size()) {
        auto n = ::pread(file->fd, out.data() + done, out.size() - done, static_cast<off_t>(file->offset + done));
        if (n <= 0) break;
        done += static_cast<std::size_t>(n);
    }
    ::close(file->fd);
    if (done != out.size()) throw std::runtime_error(describe() + ": cannot read " + path);
    return out;
}

}  // namespace berth::transfer
