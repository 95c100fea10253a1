// The node agent's pure parts: the runtime's mirror files on a made-up node, which fellow agents a
// blob comes from, the replicas' roster, and the agent's configuration.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "berth/config/config.hpp"
#include "berth/http/agent_roster.hpp"
#include "berth/node/runtime_files.hpp"
#include "proxy/agent_peers.hpp"

namespace fs = std::filesystem;
using berth::node::ConfigPath;
using State = berth::node::RuntimeFile::State;

namespace {

struct Node {
    fs::path root = fs::temp_directory_path() / ("berth-node-" + std::to_string(::getpid()));
    Node() {
        fs::remove_all(root);
        fs::create_directories(root / "etc/containerd");
    }
    ~Node() { fs::remove_all(root); }
    void write(const std::string& path, const std::string& text) {
        fs::create_directories((root / path).parent_path());
        std::ofstream(root / path) << text;
    }
    std::string read(const std::string& path) {
        std::ifstream in(root / path);
        return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    }
};

berth::proxy::RuntimeFiles files(std::vector<std::string> registries) {
    berth::proxy::RuntimeFiles out;
    out.mirror = "http://127.0.0.1:5050";
    out.registries = std::move(registries);
    return out;
}

std::map<std::string, State> states(const berth::node::RuntimeReport& report, const fs::path& root) {
    std::map<std::string, State> out;
    for (auto& file : report.files) out[fs::path(file.path).lexically_relative(root).string()] = file.state;
    return out;
}

}  // namespace

TEST_CASE("runtime files: written where the runtime is, marked, never someone else's") {
    Node node;
    node.write("etc/containerd/certs.d/quay.io/hosts.toml", "server = \"https://quay.io\"\n");
    auto report = berth::node::write_runtime_files(files({"docker.io", "quay.io"}), node.root);
    auto got = states(report, node.root);
    CHECK(got["etc/containerd/certs.d/docker.io/hosts.toml"] == State::written);
    CHECK(got["etc/containerd/certs.d/_default/hosts.toml"] == State::written);
    CHECK(got["etc/containerd/certs.d/quay.io/hosts.toml"] == State::kept);
    CHECK(got.size() == 3);  // no CRI-O, no k3s on this node: nothing written for them
    CHECK(!fs::exists(node.root / "etc/containers"));
    CHECK(!fs::exists(node.root / "etc/rancher"));
    CHECK(node.read("etc/containerd/certs.d/quay.io/hosts.toml") == "server = \"https://quay.io\"\n");
    const auto docker = node.read("etc/containerd/certs.d/docker.io/hosts.toml");
    CHECK(docker.starts_with("# berth-agent-managed:"));
    CHECK(docker.find("server = \"https://registry-1.docker.io\"") != std::string::npos);
    CHECK(docker.find("[host.\"http://127.0.0.1:5050\"]") != std::string::npos);
    CHECK(node.read("etc/containerd/certs.d/_default/hosts.toml").find("server =") == std::string::npos);
    CHECK(report.containerd == ConfigPath::unknown);  // no config.toml

    // Again: nothing to do. A file of ours changed by hand is brought back.
    node.write("etc/containerd/certs.d/docker.io/hosts.toml", "# berth-agent-managed: edited\n");
    got = states(berth::node::write_runtime_files(files({"docker.io", "quay.io"}), node.root), node.root);
    CHECK(got["etc/containerd/certs.d/docker.io/hosts.toml"] == State::written);
    CHECK(got["etc/containerd/certs.d/_default/hosts.toml"] == State::unchanged);
    CHECK(node.read("etc/containerd/certs.d/docker.io/hosts.toml") == docker);

    // A file of someone else's where one of ours would go is kept; so is a registry's directory
    // that is a link (written through as root, it could land anywhere).
    fs::create_directories(node.root / "elsewhere");
    ::symlink((node.root / "elsewhere").c_str(), (node.root / "etc/containerd/certs.d/ghcr.io").c_str());
    got = states(berth::node::write_runtime_files(files({"docker.io", "ghcr.io"}), node.root), node.root);
    CHECK(got["etc/containerd/certs.d/ghcr.io/hosts.toml"] == State::kept);
    CHECK(!fs::exists(node.root / "elsewhere/hosts.toml"));

    // Removing takes exactly ours.
    auto removed = states(berth::node::remove_runtime_files(files({"docker.io"}), node.root), node.root);
    CHECK(removed.size() == 2);
    CHECK(removed["etc/containerd/certs.d/docker.io/hosts.toml"] == State::removed);
    CHECK(removed["etc/containerd/certs.d/_default/hosts.toml"] == State::removed);
    CHECK(!fs::exists(node.root / "etc/containerd/certs.d/docker.io"));
    CHECK(fs::exists(node.root / "etc/containerd/certs.d/quay.io/hosts.toml"));
}

TEST_CASE("runtime files: CRI-O and k3s where installed; check changes nothing") {
    Node node;
    fs::create_directories(node.root / "etc/containers");
    fs::create_directories(node.root / "etc/rancher/k3s");
    auto report = berth::node::check_runtime_files(files({"docker.io"}), node.root);
    auto got = states(report, node.root);
    CHECK(got["etc/containers/registries.conf.d/50-berth-agent.conf"] == State::missing);
    CHECK(got["etc/rancher/k3s/registries.yaml"] == State::missing);
    CHECK(!fs::exists(node.root / "etc/containers/registries.conf.d"));
    berth::node::write_runtime_files(files({"docker.io"}), node.root);
    const auto crio = node.read("etc/containers/registries.conf.d/50-berth-agent.conf");
    CHECK(crio.find("location = \"127.0.0.1:5050/docker.io\"") != std::string::npos);
    CHECK(crio.find("insecure = true") != std::string::npos);
    CHECK(node.read("etc/rancher/k3s/registries.yaml").find("- \"http://127.0.0.1:5050\"") != std::string::npos);
    got = states(berth::node::check_runtime_files(files({"docker.io"}), node.root), node.root);
    for (auto& [path, state] : got) CHECK(state == State::unchanged);
    got = states(berth::node::check_runtime_files(files({"docker.io", "quay.io"}), node.root), node.root);
    CHECK(got["etc/containers/registries.conf.d/50-berth-agent.conf"] == State::stale);
}

TEST_CASE("runtime files: containerd's config_path, read") {
    Node node;
    auto state = [&](const std::string& toml) {
        node.write("etc/containerd/config.toml", toml);
        return berth::node::check_runtime_files(files({}), node.root).containerd;
    };
    CHECK(state("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = "
                "\"/etc/containerd/certs.d\"\n") == ConfigPath::set);
    CHECK(state("version = 3\n  config_path = '/etc/containerd/certs.d:/etc/docker/certs.d'\n") == ConfigPath::set);
    CHECK(state("version = 2\n") == ConfigPath::unset);
    CHECK(state("version = 2\n# config_path = \"/etc/containerd/certs.d\"\n") == ConfigPath::unset);
    CHECK(state("version = 3\n") == ConfigPath::implied);
    CHECK(state("version = 2\nconfig_path = \"/etc/docker/certs.d\"\n") == ConfigPath::elsewhere);
    fs::remove_all(node.root / "etc/containerd");
    CHECK(berth::node::check_runtime_files(files({}), node.root).containerd == ConfigPath::no_containerd);
}

TEST_CASE("bursts: each blob's tree over the agents") {
    std::vector<std::string> agents;
    for (int i = 0; i < 16; ++i) agents.push_back("10.0.0." + std::to_string(i + 2) + ":5051");
    for (const std::string digest : {"sha256:aa", "sha256:bb", "sha256:cc"}) {
        std::size_t seeds = 0;
        std::map<std::string, int> children;
        std::set<std::string> firsts;
        for (auto& agent : agents) {
            auto up = berth::proxy::ancestors(digest, agents, agent, 2);
            if (up.empty()) ++seeds;
            else ++children[up.front()];
            CHECK(up.size() <= 8);  // chains of at most (16 - 2) / 2 + 1
            for (auto& parent : up) CHECK(parent != agent);
            // The same tree whatever order the list arrives in.
            auto shuffled = agents;
            std::reverse(shuffled.begin(), shuffled.end());
            CHECK(berth::proxy::ancestors(digest, shuffled, agent, 2) == up);
        }
        CHECK(seeds == 2);
        for (auto& [parent, count] : children) CHECK(count == 1);  // chains: each agent serves one other
    }
    // Beyond chains of 16: a binary tree, each agent serving at most two, shallow.
    std::vector<std::string> many;
    for (int i = 0; i < 2000; ++i)
        many.push_back("10.1." + std::to_string(i / 250) + "." + std::to_string(i % 250) + ":5051");
    std::map<std::string, int> children;
    std::size_t deepest = 0;
    for (auto& agent : many) {
        auto up = berth::proxy::ancestors("sha256:dd", many, agent, 2);
        if (!up.empty()) ++children[up.front()];
        deepest = std::max(deepest, up.size());
    }
    CHECK(deepest <= 10);
    for (auto& [parent, count] : children) CHECK(count <= 2);
    CHECK(berth::proxy::ancestors("sha256:dd", many, "10.9.9.9:5051", 2).empty());  // not listed
}

TEST_CASE("the replicas' roster of agents") {
    berth::http::AgentRoster roster;
    CHECK(roster.heard({"10.0.0.2:5051", "a"}));
    CHECK(roster.heard({"10.0.0.3:5051", "b"}));
    CHECK(roster.heard({"10.0.0.2:5051", "a2"}));
    auto agents = roster.agents();
    REQUIRE(agents.size() == 2);
    CHECK(agents[0].address == "10.0.0.2:5051");
    CHECK(agents[0].node == "a2");
}

TEST_CASE("agent configuration: runtime, keep_images, peers, preheat") {
    using berth::config::ConfigError;
    using berth::config::parse_config;
    auto config = parse_config(R"({"listen":"127.0.0.1:5050","agent":{"replicas":["http://r:5000"],
        "runtime":{"registries":["docker.io"]},"keep_images":["registry.k8s.io/pause:3.10",
        "docker.io/library/berth@sha256:0000000000000000000000000000000000000000000000000000000000000000"],
        "preheat":{"repositories":["docker.io/team/**"]}}})");
    REQUIRE(config.proxy.runtime);
    CHECK(config.proxy.runtime->mirror == "http://127.0.0.1:5050");
    REQUIRE(config.proxy.keep_images.size() == 2);
    CHECK(config.proxy.keep_images[0].repository == "registry.k8s.io/pause");
    CHECK(config.proxy.keep_images[0].reference == "3.10");
    CHECK(config.proxy.keep_images[1].reference.starts_with("sha256:"));
    CHECK(config.proxy.preheat == std::vector<std::string>{"docker.io/team/**"});
    CHECK(!config.proxy.peers);
    auto refused = [](const std::string& agent) {
        try {
            parse_config(R"({"agent":{"replicas":["http://r:5000"],)" + agent + "}}");
        } catch (const ConfigError& error) {
            return std::string(error.what());
        }
        return std::string();
    };
    CHECK(refused(R"("runtime":{"registries":["../etc"]})").find("registry host") != std::string::npos);
    CHECK(refused(R"("runtime":{"registries":["_default"]})").find("registry host") != std::string::npos);
    CHECK(refused(R"("runtime":{"crio_dir":"relative"})").find("absolute") != std::string::npos);
    CHECK(refused(R"("keep_images":["pause:3.9"])").find("REGISTRY/NAME") != std::string::npos);
    CHECK(refused(R"("peers":{"listen":"0.0.0.0:5051"})").find("mTLS") != std::string::npos);
    CHECK(refused(R"("peers":{"listen":"0.0.0.0:5051","seeds":0})").find("seeds") != std::string::npos);
    CHECK(refused(R"("peers":{"enabled":false})").empty());
}
