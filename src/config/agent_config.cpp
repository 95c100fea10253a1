// The node agent's settings beside the node: agent.runtime (the runtime's mirror files) and
// agent.keep_images (docs/node-agent.md).
#include <arpa/inet.h>

#include "berth/net/host_port.hpp"
#include "berth/oci/digest.hpp"
#include "berth/oci/names.hpp"
#include "section.hpp"

namespace berth::config {
namespace {

// A registry's own directory name under certs.d and a prefix in CRI-O: a host name, nothing a
// path could climb out of.
void check_registry(const std::string& key, const std::string& registry) {
    if (!oci::valid_registry_host(registry) || registry.find(':') != std::string::npos ||
        !oci::valid_repository_name(registry) || registry == "_default")
        throw ConfigError(key + ": \"" + registry + "\" is not a lower-case registry host name without a port");
}

}  // namespace

std::string agent_mirror_url(const http::ServerOptions& server) {
    auto host = server.host;
    if (host.empty() || host == "0.0.0.0") host = "127.0.0.1";
    if (host == "::") host = "::1";
    if (host.find(':') != std::string::npos) host = "[" + host + "]";
    return std::string(server.tls() ? "https://" : "http://") + host + ":" + std::to_string(server.port);
}

void read_runtime_files(Section& s, Reading& r) {
    proxy::RuntimeFiles files;
    s.strings("registries", files.registries);
    for (auto& registry : files.registries) check_registry("agent.runtime.registries", registry);
    s.string("containerd_hosts_dir", files.containerd_hosts_dir);
    s.string("containerd_config", files.containerd_config);
    s.string("crio_dir", files.crio_dir);
    s.strings("registries_yaml", files.registries_yaml);
    s.string("host_root", files.host_root, false);
    for (auto* path : {&files.containerd_hosts_dir, &files.containerd_config, &files.crio_dir, &files.host_root})
        if (!path->empty() && !std::filesystem::path(*path).is_absolute())
            throw ConfigError("agent.runtime: \"" + *path + "\" must be an absolute path on the node");
    for (auto& path : files.registries_yaml)
        if (!std::filesystem::path(path).is_absolute())
            throw ConfigError("agent.runtime.registries_yaml: \"" + path + "\" must be an absolute path on the node");
    r.config.proxy.runtime = std::move(files);
}

void read_agent_peers(Section& s, Reading& r) {
    proxy::AgentPeering peers;
    bool enabled = true;
    s.boolean("enabled", enabled);
    s.string("listen", peers.listen);
    s.string("node", peers.node);
    s.number("seeds", peers.seeds, 64);
    s.string("ca_file", peers.ca_file);
    s.string("server_name", peers.server_name, false);
    s.seconds("announce_seconds", peers.announce_interval);
    if (!enabled) return;
    if (peers.listen.empty()) throw ConfigError("agent.peers.listen is required (\"0.0.0.0:5051\"), or enabled false");
    try {
        auto listen = net::parse_listen_address(peers.listen);
        peers.port = static_cast<std::uint16_t>(std::stoul(listen.port));
    } catch (const std::invalid_argument& error) {
        throw ConfigError(std::string("agent.peers.listen: ") + error.what());
    }
    if (peers.port == 0) throw ConfigError("agent.peers.listen needs a port fellow agents can be told");
    if (peers.node.size() > 63 || peers.node.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                               "0123456789.-_") != std::string::npos)
        throw ConfigError("agent.peers.node must be a node name");
    if (peers.seeds < 1) throw ConfigError("agent.peers.seeds must be at least 1");
    // The replicas forget an agent not heard from for 30 s.
    if (peers.announce_interval.count() < 1 || peers.announce_interval.count() > 20)
        throw ConfigError("agent.peers.announce_seconds must be from 1 to 20");
    if (!peers.ca_file.empty()) peers.ca_file = readable_file("agent.peers.ca_file", r.path_of(peers.ca_file));
    r.config.proxy.peers = std::move(peers);
}

void read_preheat(Section& s, Reading& r) {
    s.strings("repositories", r.config.proxy.preheat);
    check_repository_globs("agent.preheat.repositories", r.config.proxy.preheat);
    s.seconds("interval_seconds", r.config.proxy.preheat_interval);
    if (r.config.proxy.preheat_interval.count() < 1)
        throw ConfigError("agent.preheat.interval_seconds must be at least 1");
}

void read_keep_images(Section& s, Reading& r) {
    std::vector<std::string> images;
    s.strings("keep_images", images);
    if (images.size() > 64) throw ConfigError("agent.keep_images lists at most 64 images");
    for (auto& image : images) {
        proxy::Options::Image kept;
        const auto at = image.find('@');
        const auto colon = image.rfind(':');
        if (at != std::string::npos) {
            kept = {image.substr(0, at), image.substr(at + 1)};
            if (!oci::Digest::parse(kept.reference)) kept.repository.clear();
        } else if (colon != std::string::npos && image.find('/', colon) == std::string::npos) {
            kept = {image.substr(0, colon), image.substr(colon + 1)};
            if (!oci::valid_tag(kept.reference)) kept.repository.clear();
        }
        // The replicas keep an image under its registry's name: docker.io/library/pause, not pause.
        if (kept.repository.find('/') == std::string::npos || !oci::valid_repository_name(kept.repository))
            throw ConfigError("agent.keep_images: \"" + image +
                              "\" is not REGISTRY/NAME:TAG or REGISTRY/NAME@DIGEST (\"registry.k8s.io/pause:3.9\")");
        r.config.proxy.keep_images.push_back(std::move(kept));
    }
    s.seconds("keep_interval_seconds", r.config.proxy.keep_interval);
    if (r.config.proxy.keep_interval.count() < 1) throw ConfigError("agent.keep_interval_seconds must be at least 1");
}

}  // namespace berth::config
