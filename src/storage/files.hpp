#pragma once
// The file calls storage's own files share: the files store, upload files and backups.
#include <filesystem>
#include <optional>

#include "berth/storage/open_blob.hpp"

namespace berth::storage {

// fsync(2) of a file or directory by its path; throws std::system_error.
void fsync_path(const std::filesystem::path& path);
// The whole file for reading; nullopt when it cannot be opened.
std::optional<OpenBlob> open_file(const std::filesystem::path& path);

}  // namespace berth::storage
