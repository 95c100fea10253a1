// Names of carried images (names.hpp).
#include "names.hpp"

#include "berth/oci/names.hpp"

namespace berth::transfer {

std::optional<ImageName> parse_image_name(const std::string& text) {
    ImageName out;
    auto rest = text;
    if (auto at = rest.find('@'); at != std::string::npos) rest = rest.substr(0, at);  // REPO@DIGEST: by digest
    const auto slash = rest.rfind('/');
    const auto colon = rest.rfind(':');
    if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
        out.tag = rest.substr(colon + 1);
        rest = rest.substr(0, colon);
    } else if (slash == std::string::npos && text.find('@') == std::string::npos) {
        out.tag = rest;  // a bare tag
        rest.clear();
    }
    if (!rest.empty()) {
        // HOST:PORT/...: the port goes.
        auto first = rest.find('/');
        if (first != std::string::npos) {
            auto host = rest.substr(0, first);
            if (auto port = host.find(':'); port != std::string::npos) rest = host.substr(0, port) + rest.substr(first);
        }
        if (!oci::valid_repository_name(rest)) return std::nullopt;
        out.repository = rest;
    }
    if (!out.tag.empty() && !oci::valid_tag(out.tag)) return std::nullopt;
    if (out.repository.empty() && out.tag.empty()) return std::nullopt;
    return out;
}

std::string with_prefix(const std::string& prefix, const std::string& repository) {
    if (prefix.empty()) return repository;
    return prefix + "/" + repository;
}

}  // namespace berth::transfer
