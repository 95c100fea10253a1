// Manifest parsing: whatever the body, parse_manifest either returns a
// consistent view or throws berth::oci::Error(manifest_invalid); any other
// exception (a JSON library error escaping, std::out_of_range, ...) or a crash
// is a bug. On success, the referrers descriptor must render and be valid JSON.
//
// Input: an optional first line "Content-Type: <type>\n", then the body.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "berth/oci/digest.hpp"
#include "berth/oci/error.hpp"
#include "berth/oci/manifest.hpp"
#include "fuzz_check.hpp"

namespace {

using namespace berth::oci;

void check_descriptor(const Descriptor& descriptor) {
    FUZZ_CHECK(!descriptor.media_type.empty());
    FUZZ_CHECK(descriptor.size >= 0);
    FUZZ_CHECK(Digest::parse(descriptor.digest.str()) == descriptor.digest);
    if (!descriptor.annotations_json.empty()) {
        auto annotations = nlohmann::json::parse(descriptor.annotations_json, nullptr, false);
        FUZZ_CHECK(annotations.is_object());
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view body(reinterpret_cast<const char*>(data), size);
    std::string_view content_type;
    constexpr std::string_view header = "Content-Type: ";
    if (body.starts_with(header)) {
        auto newline = body.find('\n');
        content_type = body.substr(
            header.size(), newline == std::string_view::npos ? std::string_view::npos : newline - header.size());
        body = newline == std::string_view::npos ? std::string_view{} : body.substr(newline + 1);
    }

    ParsedManifest manifest;
    try {
        manifest = parse_manifest(body, content_type);
    } catch (const Error& error) {
        FUZZ_CHECK(error.code() == ErrorCode::manifest_invalid);
        return 0;
    }

    FUZZ_CHECK(!manifest.media_type.empty());
    if (!content_type.empty()) FUZZ_CHECK(manifest.media_type == content_type);
    switch (manifest.kind) {
        case ManifestKind::image:
            FUZZ_CHECK(manifest.config.has_value());
            FUZZ_CHECK(manifest.manifests.empty());
            check_descriptor(*manifest.config);
            FUZZ_CHECK(!manifest.artifact_type.empty());  // defaults to the config's media type
            break;
        case ManifestKind::index: FUZZ_CHECK(!manifest.config && manifest.layers.empty()); break;
        case ManifestKind::other:
            FUZZ_CHECK(!manifest.config && manifest.layers.empty() && manifest.manifests.empty());
            break;
    }
    for (auto& layer : manifest.layers) check_descriptor(layer);
    for (auto& child : manifest.manifests) check_descriptor(child);
    if (manifest.subject) check_descriptor(*manifest.subject);
    if (!manifest.annotations_json.empty())
        FUZZ_CHECK(nlohmann::json::parse(manifest.annotations_json, nullptr, false).is_object());

    // What the referrers API would list for this manifest.
    const auto digest = Digest::of(DigestAlgorithm::sha256, body);
    const auto rendered = referrer_descriptor_json(manifest, digest, body.size());
    auto descriptor = nlohmann::json::parse(rendered, nullptr, false);
    FUZZ_CHECK(descriptor.is_object());
    FUZZ_CHECK(descriptor.value("mediaType", "") == manifest.media_type);
    FUZZ_CHECK(descriptor.value("digest", "") == digest.str());
    FUZZ_CHECK(descriptor.value("size", std::uint64_t{0}) == body.size());
    if (!manifest.artifact_type.empty()) FUZZ_CHECK(descriptor.value("artifactType", "") == manifest.artifact_type);

    // Parsing is a function of its input.
    auto again = parse_manifest(body, content_type);
    FUZZ_CHECK(again.kind == manifest.kind && again.media_type == manifest.media_type);
    FUZZ_CHECK(again.layers.size() == manifest.layers.size() && again.manifests.size() == manifest.manifests.size());
    return 0;
}
