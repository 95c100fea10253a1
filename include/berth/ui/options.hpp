#pragma once
// The web UI's configuration (config `ui`, docs/ui.md).
#include <chrono>
#include <string>

namespace berth::ui {

// The web UI at /ui/ (docs/ui.md), config `ui`.
struct Options {
    bool enabled = true;
    // What pull commands name, e.g. "registry.example.com"; "": the address the browser used.
    std::string registry_host;
    // How long a sign-in lasts (never past the credential it came from); it cannot be renewed.
    std::chrono::seconds session_lifetime{3600};
    // ui.session_secret_file: the sessions' own secret. Without it their key is derived from the
    // cluster's secret under its own label, or drawn at start by a replica alone.
    std::string session_secret;
};

}  // namespace berth::ui
