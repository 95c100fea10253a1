#pragma once
// Tar archives as image carriers use them (oci-archive, docker save): POSIX ustar with GNU and
// pax extensions for long names and large sizes. Reading indexes the entries of a file by one
// pass over the headers (the data is skipped, never read), so any entry can then be streamed
// from its offset. Writing streams entries one after another.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

namespace berth::transfer {

struct TarEntry {
    std::uint64_t offset = 0;  // of the data in the archive file
    std::uint64_t size = 0;
};

class TarIndex {
public:
    // Throws std::runtime_error naming the archive when a header is malformed.
    explicit TarIndex(const std::filesystem::path& archive);
    std::optional<TarEntry> find(const std::string& name) const;  // "./" prefixes ignored
    const std::filesystem::path& archive() const { return archive_; }

private:
    std::filesystem::path archive_;
    std::map<std::string, TarEntry> entries_;  // regular files only
};

class TarWriter {
public:
    explicit TarWriter(const std::filesystem::path& archive);  // created, or truncated
    ~TarWriter();
    TarWriter(const TarWriter&) = delete;
    TarWriter& operator=(const TarWriter&) = delete;
    // A regular file of `size` bytes; then write() exactly that many bytes.
    void begin(const std::string& name, std::uint64_t size);
    void write(const char* data, std::size_t size);
    // The two zero blocks that end an archive; fsyncs it.
    void finish();

private:
    void put(const char* data, std::size_t size);
    int fd_ = -1;
    std::uint64_t remaining_ = 0, written_ = 0;
};

}  // namespace berth::transfer
