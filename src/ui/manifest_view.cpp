// The web UI's manifest view (views.hpp): a manifest in full, its config as the image says it,
// its platforms, layers, referrers, subject and base, and whether it is signed.
#include "berth/oci/error.hpp"
#include "berth/oci/json.hpp"
#include "berth/oci/media_types.hpp"
#include "berth/ui/views.hpp"
#include "pusher_text.hpp"

namespace berth::ui {

using oci::Error;
using oci::ErrorCode;

namespace {

json history_of(const json& entries) {
    auto history = json::array();
    if (!entries.is_array()) return history;
    for (auto& step : entries) {
        if (history.size() == max_history) break;
        history.push_back({{"created", text_or_null(member(step, "created"))},
                           {"created_by", text_or_null(member(step, "created_by"))},
                           {"comment", text_or_null(member(step, "comment"))},
                           {"empty_layer", member(step, "empty_layer") == true}});
    }
    return history;
}

// A config descriptor, and what an image's config blob says (when stored here and not too big).
json config_of(const registry::Contents& contents, const std::string& repo, const oci::Descriptor& descriptor) {
    json config = {
        {"digest", descriptor.digest.str()}, {"mediaType", descriptor.media_type}, {"size", descriptor.size}};
    auto text = contents.image_config(repo, descriptor, max_config_bytes);
    if (!text) return config;
    auto c = oci::parse_json(*text);
    auto inner = member(c, "config");
    for (auto key : {"created", "author", "os", "architecture", "variant"}) config[key] = text_or_null(member(c, key));
    config["entrypoint"] = strings_of(member(inner, "Entrypoint"));
    config["cmd"] = strings_of(member(inner, "Cmd"));
    config["env"] = strings_of(member(inner, "Env"));
    config["working_dir"] = text_or_null(member(inner, "WorkingDir"));
    config["user"] = text_or_null(member(inner, "User"));
    config["labels"] = map_of(member(inner, "Labels"));
    auto ports = json::array();
    const auto exposed = map_of(member(inner, "ExposedPorts"));
    for (auto& [port, ignored] : exposed.items()) ports.push_back(port);
    config["exposed_ports"] = ports;
    const auto entries = member(c, "history");
    config["history"] = history_of(entries);
    config["history_total"] = entries.is_array() ? entries.size() : 0;
    return config;
}

json platforms_of(const json& doc) {
    auto platforms = json::array();
    for (auto& child : member(doc, "manifests")) {
        if (platforms.size() == max_children) break;
        platforms.push_back({{"digest", text_of(member(child, "digest"))},
                             {"mediaType", text_of(member(child, "mediaType"))},
                             {"size", member(child, "size")},
                             {"platform", platform_text(member(child, "platform"))},
                             {"annotations", map_of(member(child, "annotations"))}});
    }
    return platforms;
}

void add_layers(json& out, const oci::ParsedManifest& parsed) {
    auto layers = json::array();
    std::uint64_t layer_bytes = 0;
    for (auto& layer : parsed.layers) {
        layer_bytes += static_cast<std::uint64_t>(layer.size);
        if (layers.size() < max_layers)
            layers.push_back({{"digest", layer.digest.str()}, {"mediaType", layer.media_type}, {"size", layer.size}});
    }
    out["layers"] = layers;
    out["layers_total"] = parsed.layers.size();
    out["layers_bytes"] = layer_bytes;
}

void add_referrers(json& out, const std::vector<std::string>& listed) {
    auto referrers = json::array();
    for (auto& descriptor : listed) {
        if (referrers.size() == max_referrers) break;
        auto d = oci::parse_json(descriptor);
        referrers.push_back({{"digest", text_of(member(d, "digest"))},
                             {"mediaType", text_of(member(d, "mediaType"))},
                             {"artifact_type", text_or_null(member(d, "artifactType"))},
                             {"size", member(d, "size")},
                             {"annotations", map_of(member(d, "annotations"))}});
    }
    out["referrers"] = referrers;
    out["referrers_total"] = listed.size();
}

json base_json(const std::optional<registry::BaseRead>& base) {
    if (!base) return nullptr;
    return {{"repository", base->repository}, {"digest", base->digest}, {"tags", base->tags}, {"layers", base->layers}};
}

}  // namespace

std::string manifest_json(const registry::Contents& contents, const std::string& repo, const std::string& reference,
                          const MayPull& may_pull) {
    contents.require_repository(repo);
    const auto digest_text = contents.resolve(repo, reference);
    auto record = contents.manifest(repo, digest_text);
    if (!record) throw Error(ErrorCode::manifest_unknown, "manifest unknown", reference);
    const auto digest = oci::Digest::parse_or_throw(digest_text);
    const auto parsed = oci::parse_manifest(record->bytes, record->media_type);
    const auto doc = oci::parse_json(record->bytes);
    const bool index = parsed.kind == oci::ManifestKind::index;
    const bool image_config = parsed.config && oci::media_type::image_config(parsed.config->media_type);
    json out = {{"repository", repo},
                {"reference", reference},
                {"digest", digest_text},
                {"mediaType", record->media_type},
                // An artifact without artifactType is known by its config's media type, as the referrers API says.
                {"artifact_type",
                 index || image_config ? text_or_null(member(doc, "artifactType")) : json(parsed.artifact_type)},
                {"size", size_of(contents, repo, parsed, record->bytes.size())},
                {"kind", index          ? "index"
                         : image_config ? "image"
                                        : "artifact"},
                {"tags", contents.tags_of(repo, digest_text)},
                {"annotations", map_of(member(doc, "annotations"))},
                {"platforms", platforms_of(doc)},
                {"platforms_total", parsed.manifests.size()}};
    add_layers(out, parsed);
    out["config"] = parsed.config ? config_of(contents, repo, *parsed.config) : json(nullptr);
    add_referrers(out, contents.referrers(repo, digest_text));
    out["subject"] = parsed.subject ? json{{"digest", parsed.subject->digest.str()},
                                           {"mediaType", parsed.subject->media_type},
                                           {"size", parsed.subject->size}}
                                    : json(nullptr);
    out["base"] = parsed.kind == oci::ManifestKind::image && parsed.layers.size() > 1
                      ? base_json(contents.base(repo, digest, parsed.layer_digests(), may_pull))
                      : json(nullptr);
    // An attachment is not judged: no state, no detail.
    const auto signature =
        contents.attachment(digest, parsed) ? registry::SignatureRead{} : contents.signature(repo, digest);
    out["signature"] = signature.state.empty() ? json(nullptr) : json(signature.state);
    out["signature_detail"] = signature.detail.empty() ? json(nullptr) : json(signature.detail);
    out["immutable_tags"] = contents.immutable_tags(repo) ? out["tags"] : json::array();
    out["raw_truncated"] = record->bytes.size() > max_raw_bytes;
    out["raw"] = record->bytes.substr(0, max_raw_bytes);
    return dump(out);
}

}  // namespace berth::ui
