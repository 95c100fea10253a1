#include "berth/node/runtime_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>
#include <system_error>

namespace berth::node {
namespace fs = std::filesystem;
namespace {

// The first line of every file the agent writes; the only thing that makes a file its own.
constexpr const char* marker = "# berth-agent-managed:";
constexpr std::size_t max_read = 1 << 20;

struct Planned {
    fs::path path;
    std::string content;
};

fs::path on_host(const fs::path& host_root, const std::string& path) {
    return host_root / fs::path(path).relative_path();
}

std::string header(const std::string& what) {
    return std::string(marker) + " written by `berth agent-runtime apply` (the berth node agent's DaemonSet).\n" +
           "# Removed by `berth agent-runtime remove`. Change the agent's agent.runtime settings, not this\n" +
           "# file: the next start writes it again. " + what + "\n";
}

// Docker Hub's API host is not its name; every other registry serves its API at its name.
std::string server_of(const std::string& registry) {
    return registry == "docker.io" ? "https://registry-1.docker.io" : "https://" + registry;
}

std::string hosts_toml(const std::string& registry, const std::string& mirror) {
    std::string out = header("docs/node-agent.md");
    if (registry != "_default")
        // The registry itself is the next host: a node whose agent is gone still pulls when the
        // cluster has a way out. _default names none, so containerd falls back to each image's own.
        out += "server = \"" + server_of(registry) + "\"\n";
    out += "\n[host.\"" + mirror + "\"]\n  capabilities = [\"pull\", \"resolve\"]\n";
    return out;
}

// CRI-O sends no ?ns=: the mirror's location carries the registry as its first path component.
std::string crio_dropin(const std::vector<std::string>& registries, const std::string& mirror) {
    const auto location = mirror.substr(mirror.find("://") + 3);
    std::string out = header("CRI-O re-reads it on `systemctl reload crio`.");
    for (auto& registry : registries)
        out += "\n[[registry]]\nprefix = \"" + registry + "\"\nlocation = \"" + registry +
               "\"\n\n[[registry.mirror]]\nlocation = \"" + location + "/" + registry + "\"\ninsecure = true\n";
    return out;
}

std::string registries_yaml(const std::string& mirror) {
    return header("k3s and RKE2 read it when they start.") + "mirrors:\n  \"*\":\n    endpoint:\n      - \"" + mirror +
           "\"\n";
}

bool is_dir(const fs::path& path) {
    std::error_code error;
    return fs::is_directory(path, error);
}

std::vector<Planned> plan(const proxy::RuntimeFiles& files, const fs::path& root) {
    std::vector<Planned> out;
    if (!files.containerd_hosts_dir.empty()) {
        const auto dir = on_host(root, files.containerd_hosts_dir);
        if (is_dir(dir.parent_path())) {
            for (auto& registry : files.registries)
                out.push_back({dir / registry / "hosts.toml", hosts_toml(registry, files.mirror)});
            out.push_back({dir / "_default" / "hosts.toml", hosts_toml("_default", files.mirror)});
        }
    }
    if (!files.crio_dir.empty() && !files.registries.empty()) {
        const auto dir = on_host(root, files.crio_dir);
        if (is_dir(dir.parent_path()))
            out.push_back({dir / "50-berth-agent.conf", crio_dropin(files.registries, files.mirror)});
    }
    for (auto& yaml : files.registries_yaml) {
        const auto path = on_host(root, yaml);
        if (is_dir(path.parent_path())) out.push_back({path, registries_yaml(files.mirror)});
    }
    return out;
}

enum class Found { nothing, ours, theirs };

// What is at path, without following a link there or in its directory: only a regular file
// starting with the marker is ours.
Found look(const fs::path& path, std::string* content = nullptr) {
    struct stat st {};
    // A directory on the way that is a link would take a write (as root) wherever it points.
    if (::lstat(path.parent_path().c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) return Found::theirs;
    if (::lstat(path.c_str(), &st) != 0) return errno == ENOENT ? Found::nothing : Found::theirs;
    if (!S_ISREG(st.st_mode) || st.st_size > static_cast<off_t>(max_read)) return Found::theirs;
    std::ifstream in(path, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!text.starts_with(marker)) return Found::theirs;
    if (content) *content = std::move(text);
    return Found::ours;
}

// Written whole or not at all: a runtime reading the directory never sees half a file.
void write_atomically(const fs::path& path, const std::string& content) {
    fs::create_directories(path.parent_path());
    const auto scratch = path.parent_path() / (".berth-agent." + path.filename().string() + ".tmp");
    ::unlink(scratch.c_str());  // a leftover, or a link planted there: never written through
    const int fd = ::open(scratch.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) throw std::system_error(errno, std::generic_category(), "cannot write " + scratch.string());
    const bool whole =
        ::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()) && ::fsync(fd) == 0;
    ::close(fd);
    if (!whole || ::rename(scratch.c_str(), path.c_str()) != 0) {
        const int error = errno;
        ::unlink(scratch.c_str());
        throw std::system_error(error, std::generic_category(), "cannot write " + path.string());
    }
}

// Our files the plan no longer has (a registry taken off the list): every marked hosts.toml.
std::vector<fs::path> ours_in(const proxy::RuntimeFiles& files, const fs::path& root) {
    std::vector<fs::path> out;
    if (files.containerd_hosts_dir.empty()) return out;
    std::error_code error;
    for (auto it = fs::directory_iterator(on_host(root, files.containerd_hosts_dir), error);
         !error && it != fs::directory_iterator(); it.increment(error))
        if (it->is_directory(error) && !it->is_symlink(error) && look(it->path() / "hosts.toml") == Found::ours)
            out.push_back(it->path() / "hosts.toml");
    return out;
}

void remove_ours(const fs::path& path, RuntimeReport& report) {
    if (look(path) != Found::ours) return;
    if (::unlink(path.c_str()) != 0)
        throw std::system_error(errno, std::generic_category(), "cannot remove " + path.string());
    report.files.push_back({path.string(), RuntimeFile::State::removed});
    // A registry's directory goes with its file when nothing else is in it (_default's too).
    if (path.filename() == "hosts.toml") ::rmdir(path.parent_path().c_str());
}

std::vector<std::string> split(const std::string& list, char by) {
    std::vector<std::string> out;
    std::stringstream in(list);
    for (std::string item; std::getline(in, item, by);)
        if (!item.empty()) out.push_back(item);
    return out;
}

void read_containerd_config(const proxy::RuntimeFiles& files, const fs::path& root, RuntimeReport& report) {
    if (files.containerd_hosts_dir.empty() || !is_dir(on_host(root, files.containerd_hosts_dir).parent_path()))
        return;  // no containerd here
    const auto config = on_host(root, files.containerd_config);
    std::ifstream in(config, std::ios::binary);
    if (files.containerd_config.empty() || !in) {
        report.containerd = ConfigPath::unknown;
        report.containerd_detail = "no " + files.containerd_config +
                                   ": containerd 1.x does not read the hosts directory then, 2.x reads "
                                   "/etc/containerd/certs.d";
        return;
    }
    std::string text(max_read, '\0');
    in.read(text.data(), static_cast<std::streamsize>(max_read));
    text.resize(static_cast<std::size_t>(in.gcount()));
    // Every config_path of the registry settings (CRI 1.x and 2.x, the transfer service): one that
    // names the hosts directory is enough.
    static const std::regex config_path(R"(^[ \t]*config_path[ \t]*=[ \t]*["']([^"'\n]*)["'])", std::regex::multiline);
    static const std::regex version3(R"(^[ \t]*version[ \t]*=[ \t]*3\b)", std::regex::multiline);
    std::vector<std::string> named;
    for (std::sregex_iterator it(text.begin(), text.end(), config_path), end; it != end; ++it)
        for (auto& dir : split((*it)[1].str(), ':')) named.push_back(dir);
    const auto wanted = fs::path(files.containerd_hosts_dir).lexically_normal();
    if (std::any_of(named.begin(), named.end(),
                    [&](auto& dir) { return fs::path(dir).lexically_normal() == wanted; })) {
        report.containerd = ConfigPath::set;
        report.containerd_detail = "config_path names " + files.containerd_hosts_dir;
    } else if (!named.empty()) {
        report.containerd = ConfigPath::elsewhere;
        report.containerd_detail =
            files.containerd_config + ": config_path does not name " + files.containerd_hosts_dir;
    } else if (std::regex_search(text, version3)) {
        report.containerd = wanted == "/etc/containerd/certs.d" ? ConfigPath::implied : ConfigPath::elsewhere;
        report.containerd_detail = files.containerd_config +
                                   " (version 3) sets no config_path: containerd 2.x reads "
                                   "/etc/containerd/certs.d";
    } else {
        report.containerd = ConfigPath::unset;
        report.containerd_detail =
            files.containerd_config + " sets no config_path: containerd ignores the hosts files (docs/node-agent.md)";
    }
}

}  // namespace

const char* state_name(RuntimeFile::State state) {
    constexpr const char* names[] = {"written", "unchanged", "kept", "missing", "stale", "removed"};
    return names[static_cast<int>(state)];
}

const char* config_path_name(ConfigPath state) {
    constexpr const char* names[] = {"set", "elsewhere", "unset", "implied", "unknown", "no_containerd"};
    return names[static_cast<int>(state)];
}

bool RuntimeReport::containerd_ready() const {
    return containerd == ConfigPath::set || containerd == ConfigPath::implied;
}

RuntimeReport write_runtime_files(const proxy::RuntimeFiles& files, const fs::path& host_root) {
    RuntimeReport report;
    const auto planned = plan(files, host_root);
    for (auto& path : ours_in(files, host_root))
        if (std::none_of(planned.begin(), planned.end(), [&](auto& p) { return p.path == path; }))
            remove_ours(path, report);
    for (auto& [path, content] : planned) {
        std::string current;
        switch (look(path, &current)) {
            case Found::theirs: report.files.push_back({path.string(), RuntimeFile::State::kept}); break;
            case Found::ours:
                if (current == content) {
                    report.files.push_back({path.string(), RuntimeFile::State::unchanged});
                    break;
                }
                [[fallthrough]];
            case Found::nothing:
                write_atomically(path, content);
                report.files.push_back({path.string(), RuntimeFile::State::written});
        }
    }
    read_containerd_config(files, host_root, report);
    return report;
}

RuntimeReport remove_runtime_files(const proxy::RuntimeFiles& files, const fs::path& host_root) {
    RuntimeReport report;
    for (auto& path : ours_in(files, host_root)) remove_ours(path, report);
    for (auto& [path, content] : plan(files, host_root)) remove_ours(path, report);
    return report;
}

RuntimeReport check_runtime_files(const proxy::RuntimeFiles& files, const fs::path& host_root) {
    RuntimeReport report;
    for (auto& [path, content] : plan(files, host_root)) {
        std::string current;
        auto state = RuntimeFile::State::missing;
        switch (look(path, &current)) {
            case Found::theirs: state = RuntimeFile::State::kept; break;
            case Found::ours:
                state = current == content ? RuntimeFile::State::unchanged : RuntimeFile::State::stale;
                break;
            case Found::nothing: break;
        }
        report.files.push_back({path.string(), state});
    }
    read_containerd_config(files, host_root, report);
    return report;
}

}  // namespace berth::node
