// berth: wires the layers together and runs the command line.
#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "berth/auth/authorizer.hpp"
#include "berth/config/config.hpp"
#include "berth/http/server.hpp"
#include "berth/net/resolve.hpp"
#include "berth/observe/log.hpp"
#include "berth/observe/metrics.hpp"
#include "berth/proxy/proxy.hpp"
#include "berth/registry/maintenance.hpp"
#include "berth/registry/registry.hpp"
#include "berth/registry/retention.hpp"
#include "berth/replication/replicator.hpp"
#include "berth/storage/blob_store.hpp"
#include "berth/storage/hybrid_clock.hpp"
#include "berth/storage/layout.hpp"
#include "berth/storage/meta_store.hpp"
#include "berth/storage/pull_times.hpp"

namespace layout = berth::storage::layout;

namespace {

constexpr const char* usage_text = R"(berth — an OCI distribution-spec registry

Usage:
  berth serve [--config FILE] [--listen HOST:PORT] [--root DIR]
  berth gc [--config FILE] [--root DIR] [--dry-run]
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

constexpr const char* gc_help = R"(Usage: berth gc [--config FILE] [--root DIR] [--dry-run]

Applies the configuration's retention policies (docs/retention.md), then
collects garbage in a registry's store: untagged manifests (when the
configuration's gc.delete_untagged says so), repository links no manifest
uses, and blob files nothing links, each only past gc.grace_seconds.

  --dry-run   list what would be deleted and removed, and change nothing;
              works beside a running berth (it opens the index read-only)

Without --dry-run the store must not be in use: a running berth applies its
policies every retention.interval_seconds and collects garbage itself every
gc.interval_seconds. With replication configured, other replicas' pulls are
not known here, so the rule on unpulled tags is not applied.
)";

// What a retention deletion prints: tag repo:tag, manifest repo@digest, and why.
std::string retention_line(const berth::registry::RetentionDeletion& d) {
    return d.kind + " " + d.repo + (d.kind == "tag" ? ":" : "@") + d.reference + " (" + d.policy + ": " + d.reason +
           ")";
}

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
    if (auto stored = meta.setting(layout::setting::replica_id)) return *stored;
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    auto id = sanitize_replica_id(host);
    meta.put_setting(layout::setting::replica_id, id);
    return id;
}

struct CommandLine {
    std::optional<std::string> config_file, listen, root;
    bool dry_run = false, help = false;
};

CommandLine parse_flags(const std::vector<std::string>& args, const std::string& command, bool serve) {
    CommandLine out;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const auto& arg = args[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= args.size()) throw berth::config::ConfigError(arg + " needs a value");
            return args[++i];
        };
        if (arg == "-h" || arg == "--help") out.help = true;
        else if (arg == "--config") out.config_file = value();
        else if (arg == "--root") out.root = value();
        else if (serve && arg == "--listen") out.listen = value();
        else if (!serve && arg == "--dry-run") out.dry_run = true;
        else throw berth::config::ConfigError("unknown option " + arg + " (see berth " + command + " --help)");
    }
    return out;
}

berth::config::Config load(const CommandLine& flags) {
    auto config = flags.config_file ? berth::config::load_config(*flags.config_file) : berth::config::Config{};
    if (flags.listen) berth::config::set_listen(config, *flags.listen);
    if (flags.root) config.root = *flags.root;
    return config;
}

int gc(const std::vector<std::string>& args) {
    auto flags = parse_flags(args, "gc", false);
    if (flags.help) {
        std::cout << gc_help;
        return 0;
    }
    auto config = load(flags);
    if (!std::filesystem::exists(layout::meta_dir(config.root)))
        throw berth::config::ConfigError("no registry store at " + config.root.string());
    using Mode = berth::storage::MetaStore::Mode;
    std::unique_ptr<berth::storage::MetaStore> meta;
    try {
        meta = std::make_unique<berth::storage::MetaStore>(layout::meta_dir(config.root),
                                                           flags.dry_run ? Mode::read_only : Mode::read_write);
    } catch (const std::exception& error) {
        std::cerr << "berth: " << error.what()
                  << "\n(is berth serving this store? it collects garbage itself; use --dry-run to look)\n";
        return 1;
    }
    berth::storage::BlobStore blobs(config.root);
    berth::storage::HybridClock clock(berth::storage::system_wall_clock());
    const auto replica = meta->setting(layout::setting::replica_id).value_or("berth");
    berth::storage::PullTimes pulls(*meta);
    berth::registry::Retention retention(config.retention, *meta, clock, replica, pulls);
    if (config.replication.enabled()) retention.set_peers_unreachable();
    if (retention.enabled()) {
        auto applied = retention.run(flags.dry_run, [&](const berth::registry::RetentionDeletion& deletion) {
            std::cout << (flags.dry_run ? "would delete " : "deleted ") << retention_line(deletion) << "\n";
        });
        std::cout << (flags.dry_run ? "dry run: " : "") << "retention: " << applied.tags_deleted << " tags, "
                  << applied.manifests_deleted << " manifests of " << applied.repositories << " repositories ("
                  << applied.tags_evaluated << " tags judged)";
        if (applied.unpulled_skipped)
            std::cout << "; the unpulled rule was not applied to " << applied.unpulled_skipped << " repositories";
        std::cout << "\n";
    }
    auto report = berth::registry::collect_garbage(blobs, *meta, clock, replica, config.gc, flags.dry_run);
    for (auto& line : report.removed) std::cout << (flags.dry_run ? "would remove " : "removed ") << line << "\n";
    std::cout << (flags.dry_run ? "dry run: " : "") << report.manifests << " manifests, " << report.links << " links, "
              << report.blobs << " blobs (" << report.bytes_freed << " bytes); kept " << report.blobs_kept << " blobs ("
              << report.bytes_kept << " bytes)\n";
    return 0;
}

int serve(const std::vector<std::string>& args) {
    auto flags = parse_flags(args, "serve", true);
    if (flags.help) {
        std::cout << serve_help;
        return 0;
    }
    auto config = load(flags);
    // Before anything is created on disk: an address we cannot listen on is a configuration error.
    if (berth::net::resolve({config.server.host, std::to_string(config.server.port)}).empty())
        throw berth::config::ConfigError("listen: cannot resolve host \"" + config.server.host + "\"");

    berth::storage::BlobStore blobs(config.root);
    berth::storage::MetaStore meta(layout::meta_dir(config.root), berth::storage::MetaStore::Mode::read_write,
                                   config.metadata_cache_bytes);
    // Once, for a store an older berth wrote: namespace usage from its links.
    meta.count_usage([&blobs](const std::string& digest) -> std::uint64_t {
        auto parsed = berth::oci::Digest::parse(digest);
        return parsed ? blobs.size(*parsed).value_or(0) : 0;
    });
    berth::storage::HybridClock clock(berth::storage::system_wall_clock());
    config.registry.replica_id = replica_id(config, meta);
    berth::registry::Registry registry(config.registry, blobs, meta, clock);
    berth::storage::PullTimes pulls(meta);
    registry.set_pull_times(&pulls);
    berth::registry::Retention retention(config.retention, meta, clock, config.registry.replica_id, pulls);
    std::unique_ptr<berth::replication::Replicator> replicator;
    if (config.replication.enabled()) {
        replicator = std::make_unique<berth::replication::Replicator>(config.replication, config.registry.replica_id,
                                                                      blobs, meta, clock);
        registry.set_peers(replicator.get());
        replicator->set_sparse(config.registry.sparse_manifests);
        replicator->set_pull_times(&pulls);
        retention.set_peers(replicator.get());
    }
    std::unique_ptr<berth::proxy::Proxy> proxy;
    if (config.proxy.enabled()) {
        const berth::proxy::Limits limits{config.registry.max_manifest_bytes, config.registry.max_blob_bytes,
                                          config.registry.min_free_bytes};
        proxy = std::make_unique<berth::proxy::Proxy>(config.proxy, limits, blobs, meta, clock,
                                                      config.registry.replica_id, replicator.get());
        registry.set_upstreams(proxy.get());
        if (replicator) replicator->set_mirrors(proxy.get());
    }
    berth::registry::MaintenanceStats maintenance;
    std::unique_ptr<berth::auth::Authorizer> authorizer;
    try {
        if (config.auth.enabled()) authorizer = std::make_unique<berth::auth::Authorizer>(config.auth);
    } catch (const std::exception& error) {
        throw berth::config::ConfigError(std::string("auth: ") + error.what());
    }
    try {
        berth::http::raise_descriptor_limit(config.server.max_connections);
    } catch (const std::exception& error) {
        throw berth::config::ConfigError(std::string("limits.max_connections: ") + error.what());
    }
    berth::observe::MetricsRegistry metrics;
    berth::http::Server server(config.server, registry, metrics, replicator.get(), authorizer.get());
    try {
        server.bind();
    } catch (const std::exception& error) {
        throw berth::config::ConfigError("listen: cannot listen on " + config.server.host + ":" +
                                         std::to_string(config.server.port) + ": " + error.what());
    }
    metrics.add_source([&](berth::observe::MetricsWriter& out) {
        registry.write_metrics(out);
        maintenance.write_metrics(out);
        retention.write_metrics(out);
        if (replicator) replicator->write_metrics(out);
        if (proxy) proxy->write_metrics(out);
    });
    if (proxy) {
        if (config.proxy.cache_max_bytes)
            server.every("cache_trim", std::chrono::seconds(10), [&proxy] {
                if (auto evicted = proxy->trim_cache())
                    berth::observe::log("info", "cache trimmed", {{"blobs_evicted", evicted}});
            });
    }
    server.every("upload_purge", config.upload_purge_interval, [&registry] {
        if (auto purged = registry.purge_idle_uploads())
            berth::observe::log("info", "purged idle uploads", {{"count", purged}});
    });
    if (config.gc_interval.count())
        server.every("gc", config.gc_interval, [&] {
            auto report =
                berth::registry::collect_garbage(blobs, meta, clock, config.registry.replica_id, config.gc, false);
            berth::observe::log("info", "garbage collected",
                                {{"manifests", report.manifests},
                                 {"links", report.links},
                                 {"blobs", report.blobs},
                                 {"bytes_freed", report.bytes_freed}});
            std::lock_guard lock(maintenance.mutex);
            maintenance.last_gc = std::move(report);
            ++maintenance.gc_runs;
        });
    // A short retention window (tests) is honoured about as closely as a long one.
    const auto window = config.replication.log_retention.window;
    server.every("log_compaction",
                 std::clamp<std::chrono::seconds>(window / 4, std::chrono::seconds(1), std::chrono::seconds(60)), [&] {
                     berth::replication::compact_log(meta, config.replication.log_retention, replicator.get());
                     // What a burst freed (pages of a bootstrap, large manifests, dropped
                     // cache halves) goes back to the system instead of staying in malloc's arenas.
                     malloc_trim(0);
                 });
    std::atomic<bool> stopping{false};
    server.on_shutdown([&stopping] { stopping = true; });
    // Pull times gathered in memory reach the index once a minute (storage/pull_times.hpp).
    server.every("pull_times_flush", std::chrono::seconds(60), [&pulls] { pulls.flush(); });
    if (retention.enabled() && config.retention.interval.count())
        server.every("retention", config.retention.interval, [&] {
            auto report = retention.run(false, {}, std::chrono::system_clock::now(), &stopping);
            if (report.tags_deleted || report.manifests_deleted)
                berth::observe::log("info", "retention applied",
                                    {{"repositories", report.repositories},
                                     {"tags_evaluated", report.tags_evaluated},
                                     {"tags_deleted", report.tags_deleted},
                                     {"manifests_deleted", report.manifests_deleted},
                                     {"seconds", report.seconds}});
        });
    if (config.scrub_interval.count())
        server.every("scrub", config.scrub_interval, [&] {
            auto report = berth::registry::scrub(blobs, meta, config.scrub_rate_mib << 20, stopping);
            for (auto& corrupt : report.corrupt)
                berth::observe::log("error", "scrub found corrupt content; blob quarantined", {{"digest", corrupt}});
            std::lock_guard lock(maintenance.mutex);
            maintenance.corrupt_total += report.corrupt.size();
            maintenance.last_scrub = std::move(report);
            ++maintenance.scrub_runs;
        });
    berth::observe::log(
        "info", "starting",
        {{"version", BERTH_VERSION}, {"root", config.root.string()}, {"replica_id", config.registry.replica_id}});
    if (replicator) replicator->start();
    server.run();
    if (replicator) replicator->stop();
    pulls.flush();
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    // sendfile(2) has no MSG_NOSIGNAL: a client that resets the connection in
    // the middle of a blob would otherwise kill the process. EPIPE is handled.
    std::signal(SIGPIPE, SIG_IGN);
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
        if (args[0] == "gc") return gc({args.begin() + 1, args.end()});
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
