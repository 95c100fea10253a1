#include "pusher_text.hpp"

namespace berth::ui {

json time_or_null(std::optional<std::uint64_t> ms) { return ms && *ms ? json(*ms) : json(nullptr); }

std::string dump(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string text_of(const json& value) { return value.is_string() ? value.get<std::string>() : dump(value); }

json text_or_null(const json& value) { return value.is_null() ? json(nullptr) : json(text_of(value)); }

json strings_of(const json& value) {
    if (!value.is_array()) return nullptr;
    auto out = json::array();
    for (auto& item : value) {
        if (out.size() == max_strings) break;
        out.push_back(text_of(item));
    }
    return out;
}

json map_of(const json& value) {
    auto out = json::object();
    if (!value.is_object()) return out;
    for (auto& [key, item] : value.items()) {
        if (out.size() == max_strings) break;
        out[key] = text_of(item);
    }
    return out;
}

json member(const json& object, const char* key) {
    if (!object.is_object()) return nullptr;
    auto it = object.find(key);
    return it == object.end() ? json(nullptr) : *it;
}

std::string platform_text(const json& platform) {
    if (!platform.is_object()) return {};
    auto text = text_of(member(platform, "os")) + "/" + text_of(member(platform, "architecture"));
    if (auto variant = member(platform, "variant"); variant.is_string()) text += "/" + variant.get<std::string>();
    return text;
}

namespace {

std::uint64_t size_at(const registry::Contents& contents, const std::string& repo,
                      const registry::StoredManifest& manifest, int depth) {
    try {
        return size_of(contents, repo, oci::parse_manifest(manifest.bytes, manifest.media_type), manifest.bytes.size(),
                       depth);
    } catch (const std::exception&) {
        // Stored bytes parsed when they were pushed; a newer berth's rule may refuse them now.
        return manifest.bytes.size();
    }
}

}  // namespace

std::uint64_t size_of(const registry::Contents& contents, const std::string& repo,
                      const registry::StoredManifest& manifest) {
    return size_at(contents, repo, manifest, 0);
}

std::uint64_t size_of(const registry::Contents& contents, const std::string& repo, const oci::ParsedManifest& parsed,
                      std::size_t bytes, int depth) {
    std::uint64_t size = bytes;
    if (parsed.config) size += static_cast<std::uint64_t>(parsed.config->size);
    for (auto& layer : parsed.layers) size += static_cast<std::uint64_t>(layer.size);
    std::size_t children = 0;
    for (auto& child : parsed.manifests) {
        if (depth > 0 || ++children > max_children) break;
        if (auto stored = contents.manifest(repo, child.digest.str()))
            size += size_at(contents, repo, *stored, depth + 1);
        else size += static_cast<std::uint64_t>(child.size);
    }
    return size;
}

}  // namespace berth::ui
