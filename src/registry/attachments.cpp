// What the policies exempt (docs/policies.md): an attachment, which no runtime can run. Decided by
// what the content is, never by its tag or by a field the pusher adds (a subject, an artifactType).
#include <algorithm>
#include <cctype>
#include <string>

#include "berth/oci/error.hpp"
#include "berth/oci/json.hpp"
#include "berth/oci/manifest.hpp"
#include "berth/oci/media_types.hpp"
#include "berth/registry/registry.hpp"
#include "berth/storage/blob_store.hpp"
#include "policy_memory.hpp"

namespace berth::registry {
namespace {

// cosign's signatures and DSSE attestations hold a few hundred bytes of JSON a layer, and few layers.
constexpr std::size_t max_json_layers = 64;
constexpr std::uint64_t max_json_layer_bytes = 64 << 10;

// Media types are case-insensitive (RFC 6838) and a client may read one past leading spaces: a
// layer that says "Application/vnd.oci.image.layer..." is still a layer here.
std::string normal(std::string_view type) {
    while (!type.empty() && (type.front() == ' ' || type.front() == '\t')) type.remove_prefix(1);
    std::string out(type);
    std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
    return out;
}

}  // namespace

// - An index is never one: a runtime picks an image from it (and each child is judged on its own).
// - A manifest with a layer of a layer media type, or of any type in Docker's namespace, is never
//   one: containers/image runs a Docker schema 2 manifest whatever its config's media type says,
//   taking any of Docker's types for a layer and finding its compression from its bytes. (It
//   refuses other layer types there, so cosign's signatures in Docker's media types stay
//   attachments.)
// - One whose config is not an image config is one: the image-spec's artifacts (SBOMs, Sigstore
//   bundles, Helm charts), which runtimes refuse to run.
// - One with an image config is one only when it has layers and each is a JSON document of at
//   most 64 KiB stored here (cosign's simple-signing signatures, attestations): JSON is never a
//   tar, gzip or zstd stream, so there is nothing a runtime could unpack.
bool Registry::attachment(const oci::Digest& digest, const oci::ParsedManifest& parsed) const {
    if (parsed.kind == oci::ManifestKind::index) return false;
    if (parsed.kind == oci::ManifestKind::other) return true;
    if (std::any_of(parsed.layers.begin(), parsed.layers.end(), [](auto& layer) {
            const auto type = normal(layer.media_type);
            return oci::media_type::layer(type) || type.starts_with("application/vnd.docker.");
        }))
        return false;
    if (!parsed.config || !oci::media_type::image_config(normal(parsed.config->media_type))) return true;
    if (parsed.layers.empty() || parsed.layers.size() > max_json_layers) return false;
    if (auto known = policy_memory_->attachment(digest.str())) return *known;
    const bool json_only = std::all_of(parsed.layers.begin(), parsed.layers.end(), [&](auto& layer) {
        auto bytes = blobs_.read(layer.digest, max_json_layer_bytes);
        return bytes && !oci::parse_json(*bytes).is_discarded();
    });
    // A missing layer may still arrive (a mirror, a peer): only what was read is remembered.
    if (json_only || std::all_of(parsed.layers.begin(), parsed.layers.end(),
                                 [&](auto& layer) { return blobs_.size(layer.digest).has_value(); }))
        policy_memory_->remember_attachment(digest.str(), json_only);
    return json_only;
}

bool Registry::attachment(const Manifest& manifest) const {
    try {
        return attachment(manifest.digest, oci::parse_manifest(manifest.bytes, manifest.media_type));
    } catch (const oci::Error& error) {
        if (error.code() == oci::ErrorCode::unavailable) throw;  // the store is away: not a verdict
        return false;  // stored manifests parsed when stored: judge what no longer does
    }
}

}  // namespace berth::registry
