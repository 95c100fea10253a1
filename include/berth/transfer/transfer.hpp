#pragma once
// Content across the air gap (docs/airgap.md): images loaded from files into a registry
// (`berth import`) and written from a registry into files (`berth export`), at disk or network
// speed. Either side is a store written or read directly (--root) or a registry's API (--url).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "berth/registry/options.hpp"

namespace berth::transfer {

// A registry to load into or read from.
struct Endpoint {
    std::filesystem::path root;      // the store itself (import: the server stopped; export: beside it)
    registry::Options registry;      // with root: the policies, quotas and limits its server applies
    std::string url;                 // or a registry's API: http[s]://host[:port]
    std::string username, password;  // Basic credentials for url
    std::string ca_file;             // for https url; empty: the system's
    // Where a Bearer challenge may send the credentials for a token: URLs the realm must be at or
    // under. Empty: url's own scheme, host and port only.
    std::vector<std::string> token_realms;
};

// Counted as the work goes, for a terminal's progress line.
struct Progress {
    std::atomic<std::uint64_t> bytes{0}, blobs{0}, blobs_present{0}, manifests{0};
};

struct ImportOptions {
    Endpoint into;
    std::vector<std::filesystem::path> sources;  // OCI layout dirs, oci-archive or docker save tarballs
    std::string repository;                      // for bare tags and unnamed entries
    std::string repository_prefix;               // put before every repository name
    unsigned parallel = 4;                       // blobs in flight at once
};

struct ImportReport {
    std::vector<std::string> loaded;  // REPOSITORY:TAG or REPOSITORY@DIGEST
    std::vector<std::string> failed;  // what failed and why; the rest was loaded
    std::uint64_t manifests = 0;
};

ImportReport import_images(const ImportOptions& options, Progress& progress);

struct ExportOptions {
    Endpoint from;
    std::vector<std::string> references;  // REPOSITORY[:TAG|@DIGEST]
    std::filesystem::path to;             // a directory (created), or FILE.tar
    // Leave out blobs a repository linked before this moment (--root only): an update carries
    // only what is new, and import finds the rest already on the other side.
    std::optional<std::chrono::system_clock::time_point> since;
};

struct ExportReport {
    std::vector<std::string> written;  // the references exported
    std::uint64_t manifests = 0, blobs = 0, bytes = 0, blobs_left_out = 0;
};

ExportReport export_images(const ExportOptions& options, Progress& progress);

}  // namespace berth::transfer
