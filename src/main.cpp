// berth: wires the layers together and runs the command line.
#include <netdb.h>
#include <unistd.h>

#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "berth/auth/authorizer.hpp"
#include "berth/config/config.hpp"
#include "berth/http/server.hpp"
#include "berth/observe/log.hpp"
#include "berth/registry/registry.hpp"
#include "berth/replication/replicator.hpp"
#include "berth/storage/blob_store.hpp"
#include "berth/storage/hybrid_clock.hpp"
#include "berth/storage/meta_store.hpp"

namespace {

constexpr const char* usage_text = R"(berth — an OCI distribution-spec registry

Usage:
  berth serve [--config FILE] [--listen HOST:PORT] [--root DIR]
  berth version
  berth help

Run 'berth serve --help' for what serve does.
)";

constexpr const char* serve_help = R"(Usage: berth serve [--config FILE] [--listen HOST:PORT] [--root DIR]

Serves the OCI distribution API (/v2/) over HTTP.

  --config FILE       JSON configuration (see config/berth.example.json); an
                      unknown key or a wrong type stops the start
  --listen HOST:PORT  address to listen on (default 127.0.0.1:5000)
  --root DIR          where blobs and the metadata index live (default ./data)
  -h, --help          this text

Flags override the file. SIGTERM or SIGINT stops taking new connections and
lets requests in flight finish (shutdown_grace_seconds) before exiting 0.
)";

// Replica ids appear in upload ids and log events: [a-z0-9-], at most 63.
std::string sanitize_replica_id(std::string text) {
    std::string out;
    for (char c : text) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
        if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-') out += c;
        if (out.size() == 63) break;
    }
    return out.empty() ? "berth" : out;
}

std::string replica_id(const berth::config::Config& config, berth::storage::MetaStore& meta) {
    if (!config.replica_id.empty()) return sanitize_replica_id(config.replica_id);
    if (auto stored = meta.setting("replica_id")) return *stored;
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    auto id = sanitize_replica_id(host);
    meta.put_setting("replica_id", id);
    return id;
}

int serve(const std::vector<std::string>& args) {
    std::optional<std::string> config_file, listen, root;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const auto& arg = args[i];
        if (arg == "-h" || arg == "--help") {
            std::cout << serve_help;
            return 0;
        }
        auto value = [&]() -> std::string {
            if (i + 1 >= args.size()) throw berth::config::ConfigError(arg + " needs a value");
            return args[++i];
        };
        if (arg == "--config") config_file = value();
        else if (arg == "--listen") listen = value();
        else if (arg == "--root") root = value();
        else throw berth::config::ConfigError("unknown option " + arg + " (see berth serve --help)");
    }
    auto config = config_file ? berth::config::load_config(*config_file) : berth::config::Config{};
    if (listen) berth::config::set_listen(config, *listen);
    if (root) config.root = *root;
    // Before anything is created on disk: an address we cannot listen on is a configuration error.
    addrinfo* resolved = nullptr;
    if (getaddrinfo(config.server.host.c_str(), nullptr, nullptr, &resolved) != 0)
        throw berth::config::ConfigError("listen: cannot resolve host \"" + config.server.host + "\"");
    freeaddrinfo(resolved);

    berth::storage::BlobStore blobs(config.root);
    berth::storage::MetaStore meta(config.root / "meta");
    berth::storage::HybridClock clock(berth::storage::system_wall_clock());
    config.registry.replica_id = replica_id(config, meta);
    berth::registry::Registry registry(config.registry, blobs, meta, clock);
    std::unique_ptr<berth::replication::Replicator> replicator;
    if (config.replication.enabled()) {
        replicator = std::make_unique<berth::replication::Replicator>(config.replication, config.registry.replica_id,
                                                                     blobs, meta, clock);
        registry.set_replicator(replicator.get());
    }
    std::unique_ptr<berth::auth::Authorizer> authorizer;
    try {
        if (config.auth.enabled()) authorizer = std::make_unique<berth::auth::Authorizer>(config.auth);
    } catch (const std::exception& error) {
        throw berth::config::ConfigError(std::string("auth: ") + error.what());
    }
    berth::http::Server server(config.server, registry, replicator.get(), authorizer.get());
    try {
        server.bind();
    } catch (const std::exception& error) {
        throw berth::config::ConfigError("listen: cannot listen on " + config.server.host + ":" +
                                         std::to_string(config.server.port) + ": " + error.what());
    }
    server.every(config.upload_purge_interval, [&registry] {
        if (auto purged = registry.purge_idle_uploads())
            berth::observe::log("info", "purged idle uploads", {{"count", purged}});
    });
    berth::observe::log("info", "starting",
                        {{"version", BERTH_VERSION}, {"root", config.root.string()},
                         {"replica_id", config.registry.replica_id}});
    if (replicator) replicator->start();
    server.run();
    if (replicator) replicator->stop();
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    try {
        if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
            std::cout << usage_text;
            return args.empty() ? 2 : 0;
        }
        if (args[0] == "version" || args[0] == "--version") {
            if (args.size() > 1 && (args[1] == "--help" || args[1] == "-h")) {
                std::cout << "Usage: berth version\n\nPrints berth's version.\n";
                return 0;
            }
            std::cout << "berth " << BERTH_VERSION << "\n";
            return 0;
        }
        if (args[0] == "serve") return serve({args.begin() + 1, args.end()});
        std::cerr << "berth: unknown command '" << args[0] << "'\n\n" << usage_text;
        return 2;
    } catch (const berth::config::ConfigError& error) {
        std::cerr << "berth: " << error.what() << "\n";
        return 2;
    } catch (const std::exception& error) {
        std::cerr << "berth: " << error.what() << "\n";
        return 1;
    }
}
