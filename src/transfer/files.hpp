#pragma once
// The files of an image carrier: a directory, or the entries of a tar archive, read by path.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "tar.hpp"

namespace berth::transfer {

// An open file's data: its bytes are [offset, offset + size) of fd. The caller closes fd.
struct FileRange {
    int fd = -1;
    std::uint64_t offset = 0, size = 0;
};

// Reads the file's bytes in order, a piece (up to 1 MiB) at a time, into sink. Throws when the
// file ends early or cannot be read.
void read_pieces(const FileRange& file, const std::function<void(const char*, std::size_t)>& sink);

class Files {
public:
    // A directory, or a tar archive (oci-archive, docker save).
    static std::unique_ptr<Files> open(const std::filesystem::path& source);
    virtual ~Files() = default;
    virtual std::optional<FileRange> open_file(const std::string& path) const = 0;
    virtual std::string describe() const = 0;
    bool exists(const std::string& path) const;
    // A small file whole (index.json, manifest.json, manifests, configs); nullopt when absent.
    // Throws when it is larger than max_bytes.
    std::optional<std::string> read(const std::string& path, std::size_t max_bytes) const;
};

}  // namespace berth::transfer
