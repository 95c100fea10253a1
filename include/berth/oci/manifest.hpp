#pragma once
// What berth needs to know about a manifest it is asked to store: its kind, the
// content it references, and its referrers-API fields. The bytes themselves are
// kept exactly as pushed; this is only a validated view.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "berth/oci/digest.hpp"

namespace berth::oci {

struct Descriptor {
    std::string media_type;
    Digest digest;
    std::int64_t size = 0;
    std::string artifact_type;
    std::string annotations_json;  // "" when absent, else a JSON object
    bool has_urls = false;         // foreign layers may live elsewhere
};

enum class ManifestKind { image, index, other };

struct ParsedManifest {
    std::string media_type;
    ManifestKind kind = ManifestKind::other;
    std::optional<Descriptor> config;
    std::vector<Descriptor> layers;     // blobs (image) — includes nothing from config
    std::vector<Descriptor> manifests;  // children (index)
    std::optional<Descriptor> subject;
    std::string artifact_type;  // as the referrers API reports it
    std::string annotations_json;

    // The blobs a registry must hold for this manifest: config and layers,
    // less foreign layers, which live where their URLs say.
    std::vector<Descriptor> local_blobs() const;
    // The layers' digests in order: what lineage and approved base images compare.
    std::vector<std::string> layer_digests() const;
};

// Throws Error(manifest_invalid) when the body is not a manifest berth accepts.
// content_type is the request's Content-Type without parameters (may be empty).
ParsedManifest parse_manifest(std::string_view body, std::string_view content_type);

// The referrers-API descriptor of a manifest that was stored with these bytes.
std::string referrer_descriptor_json(const ParsedManifest& manifest, const Digest& digest, std::size_t size);

}  // namespace berth::oci
