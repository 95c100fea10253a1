#include "berth/ui/files.hpp"

namespace berth::ui {

const File* find_file(std::string_view path) {
    for (auto& file : files())
        if (file.path == path) return &file;
    return nullptr;
}

std::string content_type_of(std::string_view path) {
    auto ends = [&](std::string_view ext) { return path.ends_with(ext); };
    if (ends(".html")) return "text/html; charset=utf-8";
    if (ends(".js")) return "text/javascript; charset=utf-8";
    if (ends(".css")) return "text/css; charset=utf-8";
    if (ends(".svg")) return "image/svg+xml";
    if (ends(".png")) return "image/png";
    return "application/octet-stream";
}

}  // namespace berth::ui
