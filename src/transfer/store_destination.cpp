// Importing into the store directly (--root): blobs copied once into the store's scratch space,
// hashed on the way, committed and linked; manifests through the registry's own checks (the
// server's policies, quotas and limits) and change log, so peers replicate the result.
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "berth/registry/registry.hpp"
#include "berth/storage/blob_store.hpp"
#include "berth/storage/hybrid_clock.hpp"
#include "berth/storage/layout.hpp"
#include "berth/storage/meta_store.hpp"
#include "destination.hpp"

namespace berth::transfer {

namespace {

class StoreDestination : public Destination {
public:
    StoreDestination(const std::filesystem::path& root, registry::Options options)
        : meta_(open_meta(root)), blobs_(root), clock_(storage::system_wall_clock()),
          registry_(with_replica_id(std::move(options), *meta_), blobs_, *meta_, clock_) {}

    bool has_blob(const std::string& repo, const oci::Digest& digest, std::uint64_t size) override {
        return blobs_.size(digest) == size && registry_.link_blob(repo, digest);
    }

    oci::Digest put_blob(const std::string& repo, const FileRange& file, const std::optional<oci::Digest>& expected,
                         Progress& progress) override {
        auto writer = blobs_.write(expected ? expected->algorithm() : oci::DigestAlgorithm::sha256);
        read_pieces(file, [&](const char* data, std::size_t n) {
            writer.write(data, n);
            progress.bytes += n;
        });
        const auto digest = writer.commit(expected);  // durable before it is visible
        if (!registry_.link_blob(repo, digest)) throw std::runtime_error("blob " + digest.str() + " vanished");
        return digest;
    }

    void put_manifest(const std::string& repo, const std::string& reference, const std::string& media_type,
                      const std::string& bytes) override {
        registry_.put_manifest(repo, reference, media_type, bytes);
    }

private:
    static std::unique_ptr<storage::MetaStore> open_meta(const std::filesystem::path& root) {
        try {
            return std::make_unique<storage::MetaStore>(storage::layout::meta_dir(root));
        } catch (const std::exception& error) {
            throw std::runtime_error(std::string(error.what()) +
                                     " (is berth serving this store? import into it with --url instead)");
        }
    }
    static registry::Options with_replica_id(registry::Options options, const storage::MetaStore& meta) {
        options.replica_id = meta.setting(storage::layout::setting::replica_id).value_or("berth");
        // A replica of a cluster: its peers decide new immutable tags, and none can be asked now.
        options.detached = !meta.setting(storage::layout::setting::peer_addresses).value_or("").empty();
        return options;
    }

    // The index first: its lock says no server runs here before the blob store, as the store's
    // owner, clears the scratch files a crash left.
    std::unique_ptr<storage::MetaStore> meta_;
    storage::FileBlobStore blobs_;
    storage::HybridClock clock_;
    registry::Registry registry_;
};

}  // namespace

std::unique_ptr<Destination> open_store_destination(const std::filesystem::path& root,
                                                    const registry::Options& options) {
    return std::make_unique<StoreDestination>(root, options);
}

}  // namespace berth::transfer
