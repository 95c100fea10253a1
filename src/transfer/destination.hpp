#pragma once
// Where an import writes: the store itself (StoreDestination), or a registry's API
// (ApiDestination). Both skip what is there already, so an import run again does only what is
// missing, and both verify every digest.
#include <memory>
#include <optional>
#include <string>

#include "berth/oci/digest.hpp"
#include "berth/transfer/transfer.hpp"
#include "files.hpp"

namespace berth::transfer {

class Destination {
public:
    static std::unique_ptr<Destination> open(const Endpoint& endpoint);
    virtual ~Destination() = default;
    // Whether repo can use the blob now without its bytes (it is there, or the store holds it
    // and it is linked now).
    virtual bool has_blob(const std::string& repo, const oci::Digest& digest, std::uint64_t size) = 0;
    // Streams the file's bytes in as the blob; the digest is computed on the way and must equal
    // `expected` when given (otherwise nothing is stored and this throws). Returns the digest.
    virtual oci::Digest put_blob(const std::string& repo, const FileRange& file,
                                 const std::optional<oci::Digest>& expected, Progress& progress) = 0;
    // reference: a tag, or the manifest's digest.
    virtual void put_manifest(const std::string& repo, const std::string& reference, const std::string& media_type,
                              const std::string& bytes) = 0;
};

// store_destination.cpp, api_destination.cpp
std::unique_ptr<Destination> open_store_destination(const std::filesystem::path& root,
                                                    const registry::Options& options);
std::unique_ptr<Destination> open_api_destination(const Endpoint& endpoint);

}  // namespace berth::transfer
