#include "berth/oci/manifest.hpp"

#include <nlohmann/json.hpp>

#include "berth/oci/error.hpp"
#include "berth/oci/json.hpp"
#include "berth/oci/media_types.hpp"

namespace berth::oci {
namespace {

using nlohmann::json;

[[noreturn]] void invalid(std::string message) { throw Error(ErrorCode::manifest_invalid, std::move(message)); }

std::string optional_string(const json& object, const char* key, const std::string& where) {
    auto it = object.find(key);
    if (it == object.end()) return {};
    if (!it->is_string()) invalid(where + "." + key + " must be a string");
    return it->get<std::string>();
}

std::string annotations_of(const json& object, const std::string& where) {
    auto it = object.find("annotations");
    if (it == object.end() || it->is_null()) return {};
    if (!it->is_object()) invalid(where + ".annotations must be an object");
    for (auto& [key, value] : it->items())
        if (!value.is_string()) invalid(where + ".annotations." + key + " must be a string");
    return it->dump();
}

Descriptor parse_descriptor(const json& value, const std::string& where) {
    if (!value.is_object()) invalid(where + " must be a descriptor object");
    auto media_type = optional_string(value, "mediaType", where);
    if (media_type.empty()) invalid(where + ".mediaType is required");
    auto digest = Digest::parse(optional_string(value, "digest", where));
    if (!digest) invalid(where + ".digest is missing or not a supported digest");
    auto size = value.find("size");
    if (size == value.end() || !size->is_number_integer() || size->get<std::int64_t>() < 0)
        invalid(where + ".size must be a non-negative integer");
    Descriptor descriptor{media_type, *digest, size->get<std::int64_t>(), optional_string(value, "artifactType", where),
                          annotations_of(value, where)};
    if (auto urls = value.find("urls"); urls != value.end()) {
        if (!urls->is_array()) invalid(where + ".urls must be an array");
        descriptor.has_urls = !urls->empty();
    }
    return descriptor;
}

std::vector<Descriptor> parse_descriptors(const json& object, const char* key, bool required) {
    std::vector<Descriptor> out;
    auto it = object.find(key);
    if (it == object.end() || it->is_null()) {
        if (required) invalid(std::string(key) + " is required");
        return out;
    }
    if (!it->is_array()) invalid(std::string(key) + " must be an array");
    out.reserve(it->size());
    for (std::size_t i = 0; i < it->size(); ++i)
        out.push_back(parse_descriptor((*it)[i], std::string(key) + "[" + std::to_string(i) + "]"));
    return out;
}

ManifestKind kind_of(std::string_view media_type, const json& body) {
    if (media_type == media_type::oci_manifest || media_type == media_type::docker_manifest) return ManifestKind::image;
    if (media_type == media_type::oci_index || media_type == media_type::docker_manifest_list)
        return ManifestKind::index;
    if (body.contains("manifests")) return ManifestKind::index;
    if (body.contains("config") || body.contains("layers")) return ManifestKind::image;
    return ManifestKind::other;
}

}  // namespace

ParsedManifest parse_manifest(std::string_view body, std::string_view content_type) {
    // Bounded before any document is built: a hostile manifest of brackets
    // would otherwise cost dozens of times its size.
    json doc = parse_json(body);
    if (doc.is_discarded() || !doc.is_object())
        invalid("manifest is not a JSON object (or nests too deeply or costs too much to parse)");

    ParsedManifest out;
    // A header value may carry any byte; a media type is printable ASCII. The
    // type is stored and rendered as JSON, which must be valid UTF-8.
    for (unsigned char c : content_type)
        if (c < 0x20 || c > 0x7e) invalid("Content-Type is not a valid media type");
    const auto declared = optional_string(doc, "mediaType", "manifest");
    if (!declared.empty() && !content_type.empty() && declared != content_type)
        invalid("mediaType " + declared + " does not match Content-Type " + std::string(content_type));
    out.media_type = !declared.empty() ? declared : std::string(content_type);
    if (out.media_type.starts_with("application/vnd.docker.distribution.manifest.v1+"))
        invalid("Docker schema 1 manifests are not supported");

    out.kind = kind_of(out.media_type, doc);
    if (out.media_type.empty())
        out.media_type = out.kind == ManifestKind::index ? media_type::oci_index : media_type::oci_manifest;

    if (out.kind != ManifestKind::other) {
        auto version = doc.find("schemaVersion");
        if (version == doc.end() || !version->is_number_integer() || version->get<int>() != 2)
            invalid("schemaVersion must be 2");
    }
    out.artifact_type = optional_string(doc, "artifactType", "manifest");
    out.annotations_json = annotations_of(doc, "manifest");
    if (auto subject = doc.find("subject"); subject != doc.end() && !subject->is_null())
        out.subject = parse_descriptor(*subject, "subject");

    if (out.kind == ManifestKind::image) {
        auto config = doc.find("config");
        if (config == doc.end()) invalid("config is required");
        out.config = parse_descriptor(*config, "config");
        out.layers = parse_descriptors(doc, "layers", false);
        if (out.artifact_type.empty()) out.artifact_type = out.config->media_type;
    } else if (out.kind == ManifestKind::index) {
        out.manifests = parse_descriptors(doc, "manifests", true);
    }
    return out;
}

std::vector<std::string> ParsedManifest::layer_digests() const {
    std::vector<std::string> out;
    for (auto& layer : layers) out.push_back(layer.digest.str());
    return out;
}

std::vector<Descriptor> ParsedManifest::local_blobs() const {
    std::vector<Descriptor> out;
    if (config) out.push_back(*config);
    for (auto& layer : layers) {
        // Layers an image may not redistribute are not pushed (image-spec, layer.md): the
        // manifest stands without them, wherever their URLs (if any) say they live.
        const bool foreign = layer.has_urls && layer.media_type == oci::media_type::docker_foreign_layer;
        const bool nondistributable = layer.media_type.starts_with(oci::media_type::oci_nondistributable_prefix);
        if (!foreign && !nondistributable) out.push_back(layer);
    }
    return out;
}

std::string referrer_descriptor_json(const ParsedManifest& manifest, const Digest& digest, std::size_t size) {
    json descriptor = {{"mediaType", manifest.media_type}, {"digest", digest.str()}, {"size", size}};
    if (!manifest.artifact_type.empty()) descriptor["artifactType"] = manifest.artifact_type;
    if (!manifest.annotations_json.empty()) descriptor["annotations"] = json::parse(manifest.annotations_json);
    return descriptor.dump();
}

}  // namespace berth::oci
