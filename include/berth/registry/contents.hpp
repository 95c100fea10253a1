#pragma once
// What the registry holds, as this replica's index says it stands: the read API of readers that look
// but never fetch (the web UI). Every answer is typed and bounded; nothing here fetches from an
// upstream or a peer, or notes a pull. Registry::contents() gives one; it lives no longer than the
// registry.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "berth/oci/digest.hpp"
#include "berth/oci/manifest.hpp"
#include "berth/registry/options.hpp"
#include "berth/registry/upstreams.hpp"

namespace berth::storage {
class BlobStore;
class MetaStore;
class PullTimes;
}  // namespace berth::storage

namespace berth::registry {

class Registry;
class SignatureCheck;
using MayPull = std::function<bool(const std::string& repo)>;  // null: everything

struct RepositoryRead {
    std::string name;
    std::uint64_t tags = 0, manifests = 0, bytes = 0;
    std::optional<std::uint64_t> last_push_ms, last_pull_ms;  // Unix milliseconds
};

struct TagRead {
    std::string tag, digest;
    std::optional<std::uint64_t> pushed_ms, last_pull_ms;  // last_pull: by the tag or its digest
};

struct StoredManifest {
    std::string digest, media_type, bytes;
};

// Whether a manifest is signed: "verified", "invalid" (why in detail) or "unsigned" where a policy
// asks for signatures; elsewhere "signed" when a signature is attached (unchecked: no key says whose
// it should be), else "unsigned".
struct SignatureRead {
    std::string state;
    std::string detail;
};

// The image an image is built on: another's whole layer list, the longest proper prefix of its own.
struct BaseRead {
    std::string repository, digest;
    std::vector<std::string> tags;
    std::size_t layers = 0;
};

class Contents {
public:
    struct Parts {
        const Options& options;
        const storage::BlobStore& blobs;
        const storage::MetaStore& meta;
        const storage::PullTimes* pulls;
        Upstreams* upstreams;
        SignatureCheck* signatures;
        const Registry& registry;
    };
    explicit Contents(Parts parts) : parts_(parts) {}

    // Throws NAME_INVALID for a malformed name, NAME_UNKNOWN for one not stored here.
    void require_repository(const std::string& repo) const;
    // Repository names in order after `after`, at most limit.
    std::vector<std::string> repository_names(const std::string& after, std::size_t limit) const;
    RepositoryRead repository(const std::string& repo) const;
    bool mirrored(const std::string& repo) const;
    bool immutable_tags(const std::string& repo) const;
    std::vector<MirrorStatus> mirrors() const;

    // Tag names in order after `after`, at most limit; a tag's facts (nullopt once deleted).
    std::vector<std::string> tag_names(const std::string& repo, const std::string& after, std::size_t limit) const;
    std::optional<TagRead> tag(const std::string& repo, const std::string& name) const;
    // The digest a tag or digest names (throws MANIFEST_INVALID for neither, MANIFEST_UNKNOWN).
    std::string resolve(const std::string& repo, const std::string& reference) const;
    std::optional<StoredManifest> manifest(const std::string& repo, const std::string& digest) const;
    std::vector<std::string> tags_of(const std::string& repo, const std::string& digest) const;
    // The referrers' descriptors as stored (JSON objects the pushers' manifests gave).
    std::vector<std::string> referrers(const std::string& repo, const std::string& digest) const;

    // An image's config blob when repo holds it (linked there: a digest alone never opens another
    // repository's bytes), of an image config's media type, at most max_bytes.
    std::optional<std::string> image_config(const std::string& repo, const oci::Descriptor& config,
                                            std::size_t max_bytes) const;
    SignatureRead signature(const std::string& repo, const oci::Digest& digest) const;
    bool attachment(const oci::Digest& digest, const oci::ParsedManifest& parsed) const;
    // The base of an image of these layers, preferring one the caller may pull and a tag names.
    std::optional<BaseRead> base(const std::string& repo, const oci::Digest& digest,
                                 const std::vector<std::string>& layers, const MayPull& may_pull) const;

private:
    Parts parts_;
};

}  // namespace berth::registry
