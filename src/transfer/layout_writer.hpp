#pragma once
// An OCI image layout being written by an export: a directory (blobs already there are kept) or
// a tar archive. The export's target, not the store: its own file calls are its own.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

#include "berth/oci/digest.hpp"
#include "berth/transfer/transfer.hpp"
#include "tar.hpp"

namespace berth::transfer {

class LayoutWriter {
public:
    explicit LayoutWriter(const std::filesystem::path& to);
    bool has(const oci::Digest& digest) const;
    // begin(size) is called before the bytes; every byte is hashed and must make `digest`.
    void add(const oci::Digest& digest,
             const std::function<void(const std::function<void(std::uint64_t)>&,
                                      const std::function<void(const char*, std::size_t)>&)>& produce,
             Progress& progress);
    void add_bytes(const oci::Digest& digest, const std::string& bytes, Progress& progress);
    void finish(const nlohmann::json& index);

private:
    std::filesystem::path path_of(const oci::Digest& digest) const;
    std::filesystem::path dir_;
    std::optional<TarWriter> tar_;
    std::set<std::string> written_;
};

}  // namespace berth::transfer
