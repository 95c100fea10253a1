#pragma once
// The OCI documents berth-bench pushes (image configs and manifests of one config and
// one layer) and the JSON answers it checks.
#include <cstdint>
#include <string>
#include <string_view>

#include "json_text.hpp"

namespace berth::bench {

constexpr const char* kManifestType = "application/vnd.oci.image.manifest.v1+json";
constexpr const char* kConfigType = "application/vnd.oci.image.config.v1+json";
constexpr const char* kLayerType = "application/vnd.oci.image.layer.v1.tar";

// An amd64/linux image config without layers, told apart from others by "<key>": "<value>".
std::string make_config(const std::string& key, const std::string& value);

// An image manifest of one config and one layer, as a JSON object.
Json manifest_json(const std::string& config_digest, std::uint64_t config_size, const std::string& layer_digest,
                   std::uint64_t layer_size);

// The same as text.
std::string make_manifest(const std::string& config_digest, std::uint64_t config_size, const std::string& layer_digest,
                          std::uint64_t layer_size);

// A document rendered once by nlohmann/json with kPlaceholder as one string value, the
// value filled in per use: for text made per op, where rendering the whole document
// every time would take CPU from the server under test, which shares the cores.
class JsonTemplate {
public:
    static constexpr std::string_view kPlaceholder = "@berth-bench-placeholder@";

    JsonTemplate() = default;
    explicit JsonTemplate(const Json& doc);

    // The document with `value` in place of the placeholder; a value JSON would have to
    // escape (quotes, backslashes, control characters) throws std::invalid_argument.
    std::string fill(std::string_view value) const;

private:
    std::string head_, tail_;  // the text before and after the placeholder's characters
};

// The digest of a manifest's first layer (empty when it is not JSON or names no layer).
std::string first_layer_digest(const std::string& manifest);

// Whether a tags list answer ({"name": ..., "tags": [...]}) lists `tag`.
bool tags_list_has(const std::string& body, const std::string& tag);

}  // namespace berth::bench
