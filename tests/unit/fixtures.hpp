#pragma once
// What unit tests on real stores share: a store in a temp dir with a wall clock the test moves
// (StoreFixture), a registry over it (RegistryFixture), and images built and pushed as clients
// push them (push_blob, image_manifest, index_manifest). Everything is in namespace berth::test.
#include <catch2/catch.hpp>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "berth/oci/digest.hpp"
#include "berth/registry/registry.hpp"
#include "berth/storage/blob_store.hpp"
#include "berth/storage/hybrid_clock.hpp"
#include "berth/storage/layout.hpp"
#include "berth/storage/meta_store.hpp"
#include "berth/storage/pull_times.hpp"
#include "temp_dir.hpp"

namespace berth::test {

inline constexpr const char* image_type = "application/vnd.oci.image.manifest.v1+json";
inline constexpr const char* index_type = "application/vnd.oci.image.index.v1+json";

// A realistic wall clock (ms since the epoch): far enough from zero that the link renewal window
// of put_manifest does not wrap around, so a push of freshly uploaded blobs logs exactly its
// manifest and tag events.
inline constexpr std::uint64_t wall_ms = 1'700'000'000'000;

inline oci::Digest sha256(std::string_view bytes) { return oci::Digest::of(oci::DigestAlgorithm::sha256, bytes); }
inline std::string digest_of(std::string_view bytes) { return sha256(bytes).str(); }

inline std::string read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

// ---------------------------------------------------------------------------
// Manifest bodies

struct Descriptor {
    std::string media_type;
    std::string digest;
    std::uint64_t size = 0;

    std::string json() const {
        return R"({"mediaType":")" + media_type + R"(","digest":")" + digest + R"(","size":)" + std::to_string(size) +
               "}";
    }
};

// An OCI image manifest; with a subject (a digest), a referrer of that image manifest.
inline std::string image_manifest(const Descriptor& config, const std::vector<Descriptor>& layers,
                                  const std::string& subject = "") {
    std::string body = std::string(R"({"schemaVersion":2,"mediaType":")") + image_type + R"(","config":)" +
                       config.json() + R"(,"layers":[)";
    for (std::size_t i = 0; i < layers.size(); ++i) body += (i ? "," : "") + layers[i].json();
    body += "]";
    if (!subject.empty()) body += R"(,"subject":)" + Descriptor{image_type, subject, 1}.json();
    return body + "}";
}

// The tests' usual image: an example config and one opaque layer.
inline std::string image_manifest(const oci::Digest& config, std::uint64_t config_size, const oci::Digest& layer,
                                  std::uint64_t layer_size, const std::string& subject = "") {
    return image_manifest({"application/vnd.example.config", config.str(), config_size},
                          {{"application/octet-stream", layer.str(), layer_size}}, subject);
}

// An OCI image index of image manifests.
inline std::string index_manifest(const std::vector<Descriptor>& children) {
    std::string body = std::string(R"({"schemaVersion":2,"mediaType":")") + index_type + R"(","manifests":[)";
    for (std::size_t i = 0; i < children.size(); ++i) body += (i ? "," : "") + children[i].json();
    return body + "]}";
}
inline std::string index_manifest(const std::string& child, std::uint64_t child_size) {
    return index_manifest({{image_type, child, child_size}});
}

// ---------------------------------------------------------------------------
// Stores

// Puts bytes into a blob store the way a fetch from a peer does: written, then committed under
// its digest.
inline oci::Digest store_blob(storage::BlobStore& blobs, const std::string& content) {
    auto writer = blobs.write(oci::DigestAlgorithm::sha256);
    writer.write(content.data(), content.size());
    return writer.commit();
}

// Behind a files store's back (to read or damage what it holds): where its files are.
inline std::filesystem::path blob_path(const std::filesystem::path& root, const oci::Digest& digest) {
    return storage::layout::blob_file(storage::layout::blobs_dir(root), digest);
}
inline std::filesystem::path scratch_dir(const std::filesystem::path& root) {
    return storage::layout::scratch_dir(root);
}

// A store (blobs, index, pull times) in a temp dir, with a hybrid clock over a wall clock the test
// moves (now_ms).
struct StoreFixture {
    explicit StoreFixture(std::uint64_t start_ms = wall_ms) : now_ms(start_ms) {}
    StoreFixture(const StoreFixture&) = delete;
    StoreFixture& operator=(const StoreFixture&) = delete;

    TempDir dir;
    std::uint64_t now_ms;
    storage::FileBlobStore blobs{dir.path()};
    storage::MetaStore meta{storage::layout::meta_dir(dir.path())};
    storage::HybridClock clock{[this] { return now_ms; }};
    storage::PullTimes pulls{meta};

    // now_ms, for what takes a wall clock of its own (a registry's upload and pull times).
    storage::HybridClock::WallClock wall() {
        return [this] { return now_ms; };
    }
    oci::Digest add_blob(const std::string& content) { return store_blob(blobs, content); }

    // A repository's live tags, in byte order.
    std::vector<std::string> tags(const std::string& repo) const { return meta.tags(repo, "", 1000); }
    // Whether the index holds the manifest, not its tombstone.
    bool live(const std::string& repo, const std::string& digest) const {
        auto record = meta.manifest(repo, digest);
        return record && !record->deleted;
    }
};

// ---------------------------------------------------------------------------
// Registries

inline registry::Options registry_options(const std::string& replica_id = "test") {
    registry::Options options;
    options.replica_id = replica_id;
    return options;
}

// Uploads content into repo in one append; returns the digest the registry stored it under, or
// throws what finish_upload throws (a quota's DENIED, say).
inline std::string push_blob(registry::Registry& reg, const std::string& repo, const std::string& content) {
    auto session = reg.start_upload(repo);
    reg.append(repo, session.id, 0)->write(content.data(), content.size());
    return reg.finish_upload(repo, session.id, digest_of(content)).str();
}

struct RegistrySetup {
    registry::Options options = registry_options();
    registry::Collaborators with = {};
    bool note_pulls = false;  // the registry notes pulls in the store's PullTimes (retention)
    std::uint64_t start_ms = wall_ms;
};

// A registry over a StoreFixture, its uploads and pulls timed by now_ms.
struct RegistryFixture : StoreFixture {
    explicit RegistryFixture(RegistrySetup setup = {})
        : StoreFixture(setup.start_ms), reg(std::move(setup.options), blobs, meta, clock, wiring(setup), wall()) {}

    registry::Registry reg;
    // CHECK that each push_blob is stored under its content's digest. Off by default: Catch's
    // assertions are not thread-safe, and a push may be meant to throw.
    bool check_pushes = false;

    std::string push_blob(const std::string& repo, const std::string& content) {
        auto stored = test::push_blob(reg, repo, content);
        if (check_pushes) CHECK(stored == digest_of(content));
        return stored;
    }

    // The manifest of an image unique to seed (config "config-<seed>", layer "layer-<seed>"),
    // its blobs pushed to repo; with a subject, a referrer of it.
    std::string image(const std::string& repo, const std::string& seed, const std::string& subject = "") {
        const std::string config = "config-" + seed, layer = "layer-" + seed;
        push_blob(repo, config);
        push_blob(repo, layer);
        return image_manifest(sha256(config), config.size(), sha256(layer), layer.size(), subject);
    }

    // That image pushed by tag (by digest when tag is empty); returns its digest.
    std::string push(const std::string& repo, const std::string& tag, const std::string& seed,
                     const std::string& subject = "") {
        auto body = image(repo, seed, subject);
        return reg.put_manifest(repo, tag.empty() ? digest_of(body) : tag, "", body).digest.str();
    }

    // An index of children (manifest digests in repo), pushed by tag or by digest; returns its digest.
    std::string push_index(const std::string& repo, const std::string& tag, const std::vector<std::string>& children) {
        std::vector<Descriptor> listed;
        for (auto& child : children) listed.push_back({image_type, child, meta.manifest(repo, child)->bytes.size()});
        auto body = index_manifest(listed);
        return reg.put_manifest(repo, tag.empty() ? digest_of(body) : tag, index_type, body).digest.str();
    }

private:
    registry::Collaborators wiring(const RegistrySetup& setup) {
        auto with = setup.with;
        if (setup.note_pulls) with.pulls = &pulls;
        return with;
    }
};

}  // namespace berth::test
