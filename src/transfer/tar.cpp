// Tar reading (an index of entries) and writing (tar.hpp).
#include "tar.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <string_view>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace berth::transfer {

namespace {

constexpr std::size_t block = 512;
constexpr std::size_t max_long_name = 64 << 10;

[[noreturn]] void malformed(const std::filesystem::path& archive, const std::string& why) {
    throw std::runtime_error(archive.string() + ": not a tar archive berth can read (" + why + ")");
}

// A numeric header field: octal text, or GNU base-256 (high bit set) for large values.
std::uint64_t number(const char* field, std::size_t size) {
    if (static_cast<unsigned char>(field[0]) & 0x80) {
        std::uint64_t value = static_cast<unsigned char>(field[0]) & 0x7f;
        for (std::size_t i = 1; i < size; ++i) value = (value << 8) | static_cast<unsigned char>(field[i]);
        return value;
    }
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < size && field[i]; ++i) {
        if (field[i] == ' ') continue;
        if (field[i] < '0' || field[i] > '7') break;
        value = value * 8 + static_cast<std::uint64_t>(field[i] - '0');
    }
    return value;
}

std::string text(const char* field, std::size_t size) { return std::string(field, strnlen(field, size)); }

std::string clean(std::string name) {
    while (name.starts_with("./")) name.erase(0, 2);
    return name;
}

bool read_exactly(int fd, char* data, std::size_t size, std::uint64_t offset) {
    while (size) {
        auto n = ::pread(fd, data, size, static_cast<off_t>(offset));
        if (n <= 0) return false;
        data += n;
        size -= static_cast<std::size_t>(n);
        offset += static_cast<std::uint64_t>(n);
    }
    return true;
}

// "path" (and "size") from a pax extended header's records: "LEN key=value\n".
// A decimal number, or nullopt when the text is not one.
std::optional<std::uint64_t> decimal(std::string_view text) {
    std::uint64_t value = 0;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
    return value;
}

// "path" and "size" from a pax extended header's records: "LEN key=value\n". size: 0 when the
// records give none (a pax size of 0 then changes nothing either).
void pax_records(const std::string& records, std::string& path, std::uint64_t& size) {
    std::size_t at = 0;
    while (at < records.size()) {
        auto space = records.find(' ', at);
        if (space == std::string::npos) return;
        auto length = decimal(std::string_view(records).substr(at, space - at));
        if (!length || *length < space - at + 2 || *length > records.size() - at) return;
        auto record = std::string_view(records).substr(space + 1, *length - (space - at) - 2);
        auto equals = record.find('=');
        if (equals != std::string_view::npos) {
            auto key = record.substr(0, equals), value = record.substr(equals + 1);
            if (key == "path") path = std::string(value);
            else if (key == "size") size = decimal(value).value_or(0);
        }
        at += *length;
    }
}

}  // namespace

TarIndex::TarIndex(const std::filesystem::path& archive) : archive_(archive) {
    int fd = ::open(archive.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw std::runtime_error("cannot read " + archive.string());
    const auto length = static_cast<std::uint64_t>(::lseek(fd, 0, SEEK_END));
    std::uint64_t offset = 0;
    std::string long_name;
    std::uint64_t pax_size = 0;
    std::array<char, block> header{};
    try {
        while (offset + block <= length) {
            if (!read_exactly(fd, header.data(), block, offset)) malformed(archive, "short read");
            if (std::all_of(header.begin(), header.end(), [](char c) { return c == 0; })) break;
            std::uint64_t sum = 0;
            for (std::size_t i = 0; i < block; ++i)
                sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(header[i]);
            if (sum != number(header.data() + 148, 8))
                malformed(archive, "header checksum at " + std::to_string(offset));
            auto size = number(header.data() + 124, 12);
            const char type = header[156];
            const auto data = offset + block;
            // Sizes past the end are refused before any arithmetic on them can wrap.
            if (size > length - data) malformed(archive, "an entry runs past the end");
            if (type == 'x' || type == 'L') {
                if (size > max_long_name) malformed(archive, "an extended header too large");
                std::string content(size, '\0');
                if (!read_exactly(fd, content.data(), size, data)) malformed(archive, "short read");
                if (type == 'L') long_name = text(content.data(), content.size());
                else pax_records(content, long_name, pax_size);
            } else {
                if (pax_size) size = pax_size;
                if (size > length - data) malformed(archive, "an entry runs past the end");
                auto name = long_name;
                if (name.empty()) {
                    name = text(header.data(), 100);
                    const auto prefix = text(header.data() + 345, 155);
                    if (!prefix.empty() && std::memcmp(header.data() + 257, "ustar", 5) == 0)
                        name = prefix + "/" + name;
                }
                if (type == '0' || type == '\0' || type == '7') entries_[clean(name)] = {data, size};
                long_name.clear();
                pax_size = 0;
            }
            offset = data + (size + block - 1) / block * block;
        }
    } catch (...) {
        ::close(fd);
        throw;
    }
    ::close(fd);
}

std::optional<TarEntry> TarIndex::find(const std::string& name) const {
    auto it = entries_.find(clean(name));
    if (it == entries_.end()) return std::nullopt;
    return it->second;
}

TarWriter::TarWriter(const std::filesystem::path& archive) {
    fd_ = ::open(archive.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) throw std::runtime_error("cannot write " + archive.string());
}

TarWriter::~TarWriter() {
    if (fd_ >= 0) ::close(fd_);
}

void TarWriter::put(const char* data, std::size_t size) {
    while (size) {
        auto n = ::write(fd_, data, size);
        if (n <= 0) throw std::runtime_error("cannot write the archive");
        data += n;
        size -= static_cast<std::size_t>(n);
        written_ += static_cast<std::uint64_t>(n);
    }
}

namespace {

// A ustar header for a regular file ('0') or a GNU long name ('L'), its checksum filled in.
std::array<char, block> header_for(const std::string& name, std::uint64_t size, char type) {
    std::array<char, block> header{};
    std::memcpy(header.data(), name.data(), std::min<std::size_t>(name.size(), 100));
    std::snprintf(header.data() + 100, 8, "%07o", 0644);
    std::snprintf(header.data() + 108, 8, "%07o", 0);
    std::snprintf(header.data() + 116, 8, "%07o", 0);
    if (size < (std::uint64_t(1) << 33)) {
        std::snprintf(header.data() + 124, 12, "%011llo", static_cast<unsigned long long>(size));
    } else {  // GNU base-256 for entries of 8 GiB or more
        header[124] = static_cast<char>(0x80);
        for (int i = 11; i >= 4; --i) header[124 + i] = static_cast<char>((size >> (8 * (11 - i))) & 0xff);
    }
    std::snprintf(header.data() + 136, 12, "%011o", 0);
    header[156] = type;
    std::memcpy(header.data() + 257, "ustar", 6);
    std::memcpy(header.data() + 263, "00", 2);
    std::memset(header.data() + 148, ' ', 8);
    unsigned sum = 0;
    for (char c : header) sum += static_cast<unsigned char>(c);
    std::snprintf(header.data() + 148, 8, "%06o", sum);
    return header;
}

}  // namespace

void TarWriter::begin(const std::string& name, std::uint64_t size) {
    if (remaining_) throw std::logic_error("tar entry begun before the last one was written");
    if (name.size() > 100) {
        // GNU long name: an 'L' entry holding the name, then the entry itself.
        put(header_for("././@LongLink", name.size() + 1, 'L').data(), block);
        std::string padded = name;
        padded.resize((name.size() + 1 + block - 1) / block * block, '\0');
        put(padded.data(), padded.size());
    }
    put(header_for(name, size, '0').data(), block);
    remaining_ = size;
}

void TarWriter::write(const char* data, std::size_t size) {
    if (size > remaining_) throw std::logic_error("more bytes than the tar entry's size");
    put(data, size);
    remaining_ -= size;
    if (remaining_ == 0 && written_ % block) {
        std::array<char, block> zeros{};
        put(zeros.data(), block - written_ % block);
    }
}

void TarWriter::finish() {
    if (remaining_) throw std::logic_error("tar entry not complete");
    std::array<char, 2 * block> zeros{};
    put(zeros.data(), zeros.size());
    if (::fsync(fd_) != 0) throw std::runtime_error("cannot sync the archive");
    ::close(fd_);
    fd_ = -1;
}

}  // namespace berth::transfer
