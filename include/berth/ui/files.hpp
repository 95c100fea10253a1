#pragma once
// The web UI's files (src/http/ui/), compiled in by embed_ui.cmake: air-gapped clusters have no CDN,
// and the binary serves exactly the UI it was built with.
#include <span>
#include <string_view>

namespace berth::http {

struct UiFile {
    std::string_view path;  // relative to ui/, e.g. "pages/cluster.js"
    std::string_view body;
};

std::span<const UiFile> ui_files();

}  // namespace berth::http
