#pragma once
// The web UI's files (src/ui/assets/), compiled in by embed_assets.cmake: air-gapped clusters have
// no CDN, and the binary serves exactly the UI it was built with.
#include <span>
#include <string>
#include <string_view>

namespace berth::ui {

struct File {
    std::string_view path;  // relative to ui/, e.g. "pages/cluster.js"
    std::string_view body;
};

std::span<const File> files();
// The file at path, if the UI has one, and its Content-Type.
const File* find_file(std::string_view path);
std::string content_type_of(std::string_view path);

}  // namespace berth::ui
