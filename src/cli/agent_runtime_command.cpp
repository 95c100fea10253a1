// berth agent-runtime: the node's container runtime pointed at the node agent, and back.
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <iostream>

#include "berth/config/config.hpp"
#include "berth/node/runtime_files.hpp"
#include "commands.hpp"

namespace berth::cli {
namespace {

constexpr const char* agent_runtime_help =
    R"(Usage: berth agent-runtime apply|check|remove --config FILE [--host-root DIR]
                           [--cache-owner UID:GID] [--wait]

Points the node's container runtime at the node agent that FILE configures
(agent.runtime), the way the agent's DaemonSet does in its init container:

  apply    writes containerd's certs.d/<registry>/hosts.toml and _default, a
           CRI-O registries.conf.d drop-in, k3s/RKE2 registries.yaml, each
           where that runtime is installed. Every file starts with a marker
           line; a file without it is left alone ("kept"), and marked files
           the configuration no longer names are removed.
  check    changes nothing; prints what is there against what apply writes.
  remove   deletes the marked files (uninstalling the agent).

containerd's config.toml is read, never edited: when its config_path does
not name the hosts directory, the line "containerd unset ..." says so and
containerd will not use the agent until it is set (docs/node-agent.md).

  --host-root DIR       the node's / as mounted here (default agent.runtime.host_root)
  --cache-owner U:G     apply: create FILE's root and give it to U:G, for an
                        agent that runs as that user on a hostPath cache
  --wait                after the command, wait for SIGTERM (a DaemonSet's
                        only container)

Exit status: 0 when done (check: every file in place and containerd's
config_path set, or no containerd); 1 when check finds something missing.
)";

volatile std::sig_atomic_t stopped = 0;

void print(const node::RuntimeReport& report) {
    for (auto& file : report.files) std::cout << node::state_name(file.state) << " " << file.path << "\n";
    if (report.containerd != node::ConfigPath::no_containerd)
        std::cout << "containerd " << node::config_path_name(report.containerd) << " " << report.containerd_detail
                  << "\n";
}

void own_cache(const std::filesystem::path& root, const std::string& owner) {
    const auto colon = owner.find(':');
    std::size_t used = 0, used_gid = 0;
    unsigned long uid = 0, gid = 0;
    try {
        uid = std::stoul(owner.substr(0, colon), &used);
        gid = std::stoul(owner.substr(colon + 1), &used_gid);
    } catch (const std::exception&) {
        used = 0;
    }
    if (colon == std::string::npos || used != colon || used_gid != owner.size() - colon - 1)
        throw UsageError("--cache-owner is UID:GID, numbers");
    std::filesystem::create_directories(root);
    if (::chown(root.c_str(), static_cast<uid_t>(uid), static_cast<gid_t>(gid)) != 0)
        throw std::system_error(errno, std::generic_category(), "cannot give " + root.string() + " to " + owner);
    std::cout << "owned " << root.string() << " " << owner << "\n";
}

}  // namespace

int agent_runtime(const std::vector<std::string>& args) {
    auto arguments = parse_arguments(args, {"--config", "--host-root", "--cache-owner"}, {"--wait"});
    if (arguments.help) {
        std::cout << agent_runtime_help;
        return 0;
    }
    if (arguments.rest.size() != 1) throw UsageError("name one of apply, check, remove");
    const auto& verb = arguments.rest.front();
    auto config = config::load_config(arguments.required("--config"));
    if (!config.proxy.runtime) throw UsageError("the configuration has no agent.runtime");
    const std::filesystem::path host_root = arguments.value("--host-root").value_or(config.proxy.runtime->host_root);
    int status = 0;
    if (verb == "apply") {
        if (auto owner = arguments.value("--cache-owner")) own_cache(config.root, *owner);
        print(node::write_runtime_files(*config.proxy.runtime, host_root));
    } else if (verb == "remove") {
        print(node::remove_runtime_files(*config.proxy.runtime, host_root));
    } else if (verb == "check") {
        auto report = node::check_runtime_files(*config.proxy.runtime, host_root);
        print(report);
        for (auto& file : report.files)
            if (file.state == node::RuntimeFile::State::missing || file.state == node::RuntimeFile::State::stale)
                status = 1;
        if (report.containerd != node::ConfigPath::no_containerd && !report.containerd_ready()) status = 1;
    } else {
        throw UsageError("unknown agent-runtime command " + verb + " (apply, check, remove)");
    }
    std::cout.flush();
    if (arguments.flag("--wait")) {
        std::signal(SIGTERM, [](int) { stopped = 1; });
        std::signal(SIGINT, [](int) { stopped = 1; });
        while (!stopped) ::pause();
    }
    return status;
}

}  // namespace berth::cli
