#pragma once
// What the views share: the pushers' words (manifests, configs, annotations) as text, bounded, and
// an image's size as the views count it.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "berth/oci/manifest.hpp"
#include "berth/registry/contents.hpp"

namespace berth::ui {

using nlohmann::json;

inline constexpr std::size_t max_children = 64, max_strings = 500;

// Unix milliseconds, or null for never.
json time_or_null(std::optional<std::uint64_t> ms);
// JSON text with invalid UTF-8 replaced: what every view answers with.
std::string dump(const json& value);
// A pusher's value as text: strings as they are, anything else as its JSON.
std::string text_of(const json& value);
// The same, or null where the pusher wrote nothing.
json text_or_null(const json& value);
// At most max_strings of an array's items as text; null for no array.
json strings_of(const json& value);
// At most max_strings of an object's members as text.
json map_of(const json& value);
json member(const json& object, const char* key);
// "os/architecture[/variant]" of an index entry's platform.
std::string platform_text(const json& platform);

// An image: its manifest, config and layers; an index: itself and its children stored here (at
// most max_children of them, one level deep).
std::uint64_t size_of(const registry::Contents& contents, const std::string& repo,
                      const registry::StoredManifest& manifest);
std::uint64_t size_of(const registry::Contents& contents, const std::string& repo, const oci::ParsedManifest& parsed,
                      std::size_t bytes, int depth = 0);

}  // namespace berth::ui
