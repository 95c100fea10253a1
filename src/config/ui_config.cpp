// The `ui` section: the web UI at /ui/ (docs/ui.md).
#include "section.hpp"

namespace berth::config {

void read_ui(Section& s, Reading& r) {
    auto& ui = r.config.server.ui;
    s.boolean("enabled", ui.enabled);
    s.string("registry_host", ui.registry_host);
    s.seconds("session_seconds", ui.session_lifetime);
    std::string secret_file;
    s.string("session_secret_file", secret_file, false);
    if (!secret_file.empty()) {
        ui.session_secret = secret_from("ui.session_secret_file", r.path_of(secret_file));
        if (ui.session_secret.size() < 16)
            throw ConfigError("ui.session_secret_file must hold a secret of at least 16 characters");
    }
    if (ui.session_lifetime.count() < 60 || ui.session_lifetime.count() > 7 * 24 * 3600)
        throw ConfigError("ui.session_seconds must be between 60 and 604800");
    if (ui.registry_host.find_first_of(" /\"'<>") != std::string::npos)
        throw ConfigError("ui.registry_host must be a HOST[:PORT]");
}

}  // namespace berth::config
