#pragma once
// The node's container runtime pointed at its agent: containerd's certs.d/<host>/hosts.toml (and
// _default), a CRI-O registries.conf.d drop-in, k3s/RKE2 registries.yaml. Every file written
// starts with a marker line; a file without it is someone else's and is never touched. Removing
// deletes exactly the marked files. containerd's config.toml is only read: whether config_path
// lets it see the hosts files is reported, never edited.
#include <filesystem>
#include <string>
#include <vector>

#include "berth/proxy/options.hpp"

namespace berth::node {

struct RuntimeFile {
    enum class State {
        written,    // created or brought up to date
        unchanged,  // ours, already as it should be
        kept,       // someone else's file (or not a regular file) is there: left alone
        missing,    // check: ours should be there and is not
        stale,      // check: ours, but not what the configuration writes now
        removed,
    };
    std::string path;
    State state;
};
const char* state_name(RuntimeFile::State state);

// Whether containerd reads the hosts directory, from its config.toml.
enum class ConfigPath {
    set,        // config_path names the hosts directory
    elsewhere,  // config_path names other directories only
    unset,      // no config_path: containerd 1.x ignores certs.d
    implied,    // no config_path in a version 3 file: containerd 2.x reads /etc/containerd/certs.d
    unknown,    // no config.toml, or it could not be read
    no_containerd,
};
const char* config_path_name(ConfigPath state);

struct RuntimeReport {
    std::vector<RuntimeFile> files;
    ConfigPath containerd = ConfigPath::no_containerd;
    std::string containerd_detail;  // what was read, for the log
    // Whether a pull through containerd reaches the agent: config_path and our files in place.
    bool containerd_ready() const;
};

// host_root prefixes every path (the init container mounts the node's /etc under /host/etc).
RuntimeReport write_runtime_files(const proxy::RuntimeFiles& files, const std::filesystem::path& host_root = "/");
RuntimeReport remove_runtime_files(const proxy::RuntimeFiles& files, const std::filesystem::path& host_root = "/");
// Changes nothing: what the node has against what write_runtime_files would write.
RuntimeReport check_runtime_files(const proxy::RuntimeFiles& files, const std::filesystem::path& host_root = "/");

}  // namespace berth::node
