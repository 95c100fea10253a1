// Image configs and manifests built, and manifests and tags lists read, with nlohmann/json.
#include "manifests.hpp"

#include <algorithm>
#include <stdexcept>

namespace berth::bench {

std::string make_config(const std::string& key, const std::string& value) {
    Json config = {{"architecture", "amd64"},
                   {"os", "linux"},
                   {"rootfs", {{"type", "layers"}, {"diff_ids", Json::array()}}},
                   {key, value}};
    return to_text(config);
}

Json manifest_json(const std::string& config_digest, std::uint64_t config_size, const std::string& layer_digest,
                   std::uint64_t layer_size) {
    return {{"schemaVersion", 2},
            {"mediaType", kManifestType},
            {"config", {{"mediaType", kConfigType}, {"digest", config_digest}, {"size", config_size}}},
            {"layers", Json::array({{{"mediaType", kLayerType}, {"digest", layer_digest}, {"size", layer_size}}})}};
}

std::string make_manifest(const std::string& config_digest, std::uint64_t config_size, const std::string& layer_digest,
                          std::uint64_t layer_size) {
    return to_text(manifest_json(config_digest, config_size, layer_digest, layer_size));
}

JsonTemplate::JsonTemplate(const Json& doc) {
    const std::string text = to_text(doc);
    const std::string quoted = '"' + std::string(kPlaceholder) + '"';
    const auto at = text.find(quoted);
    if (at == std::string::npos || text.find(quoted, at + 1) != std::string::npos)
        throw std::logic_error("JsonTemplate: the placeholder must be one value of the document");
    head_ = text.substr(0, at + 1);
    tail_ = text.substr(at + quoted.size() - 1);
}

std::string JsonTemplate::fill(std::string_view value) const {
    for (char ch : value)
        if (ch == '"' || ch == '\\' || static_cast<unsigned char>(ch) < 0x20)
            throw std::invalid_argument("JsonTemplate: a value JSON would escape");
    std::string out;
    out.reserve(head_.size() + value.size() + tail_.size());
    out += head_;
    out += value;
    out += tail_;
    return out;
}

std::string first_layer_digest(const std::string& manifest) {
    const auto m = nlohmann::json::parse(manifest, nullptr, false);
    if (!m.is_object()) return {};  // also when it did not parse (discarded)
    const auto layers = m.find("layers");
    if (layers == m.end() || !layers->is_array() || layers->empty() || !layers->front().is_object()) return {};
    const auto digest = layers->front().find("digest");
    return digest != layers->front().end() && digest->is_string() ? digest->get<std::string>() : std::string();
}

bool tags_list_has(const std::string& body, const std::string& tag) {
    const auto list = nlohmann::json::parse(body, nullptr, false);
    if (!list.is_object()) return false;
    const auto tags = list.find("tags");
    return tags != list.end() && tags->is_array() && std::find(tags->begin(), tags->end(), tag) != tags->end();
}

}  // namespace berth::bench
