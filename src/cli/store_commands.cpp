// berth serve and berth gc: the server, and the store's retention and garbage collection by hand.
#include <filesystem>
#include <iostream>

#include "berth/config/config.hpp"
#include "berth/node/node.hpp"
#include "berth/registry/maintenance.hpp"
#include "berth/registry/retention.hpp"
#include "berth/storage/blob_store.hpp"
#include "berth/storage/hybrid_clock.hpp"
#include "berth/storage/layout.hpp"
#include "berth/storage/meta_store.hpp"
#include "berth/storage/pull_times.hpp"
#include "commands.hpp"

namespace berth::cli {
namespace {

namespace layout = storage::layout;

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

// The configuration file, then the flags over it.
config::Config load(const Arguments& arguments) {
    auto config = arguments.value("--config") ? config::load_config(*arguments.value("--config")) : config::Config{};
    if (auto listen = arguments.value("--listen")) config::apply_listen(config, *listen);
    if (auto root = arguments.value("--root")) config.root = *root;
    return config;
}

void refuse_operands(const Arguments& arguments) {
    if (!arguments.rest.empty()) throw UsageError("unexpected argument " + arguments.rest.front());
}

}  // namespace

int serve(const std::vector<std::string>& args) {
    auto arguments = parse_arguments(args, {"--config", "--listen", "--root"}, {});
    if (arguments.help) {
        std::cout << serve_help;
        return 0;
    }
    refuse_operands(arguments);
    return node::serve(load(arguments));
}

int gc(const std::vector<std::string>& args) {
    auto arguments = parse_arguments(args, {"--config", "--root"}, {"--dry-run"});
    if (arguments.help) {
        std::cout << gc_help;
        return 0;
    }
    refuse_operands(arguments);
    const bool dry_run = arguments.flag("--dry-run");
    auto config = load(arguments);
    if (config.s3_blobs)
        throw UsageError("the store keeps its blobs in a bucket (storage.blobs): the server's own gc collects them");
    if (!std::filesystem::exists(layout::meta_dir(config.root)))
        throw UsageError("no registry store at " + config.root.string());
    using Mode = storage::MetaStore::Mode;
    std::unique_ptr<storage::MetaStore> meta;
    try {
        meta = std::make_unique<storage::MetaStore>(layout::meta_dir(config.root),
                                                    dry_run ? Mode::read_only : Mode::read_write);
    } catch (const std::exception& error) {
        std::cerr << "berth: " << error.what()
                  << "\n(is berth serving this store? it collects garbage itself; use --dry-run to look)\n";
        return 1;
    }
    storage::FileBlobStore blobs(config.root, dry_run ? storage::StoreUse::beside : storage::StoreUse::owner);
    storage::HybridClock clock(storage::system_wall_clock());
    const auto replica = meta->setting(layout::setting::replica_id).value_or("berth");
    storage::PullTimes pulls(*meta);
    registry::Retention retention(config.retention, *meta, clock, replica, pulls,
                                  {.unreachable = config.replication.enabled()});
    if (retention.enabled()) {
        auto applied = retention.run(dry_run, [&](const registry::RetentionDeletion& deletion) {
            std::cout << (dry_run ? "would delete " : "deleted ") << retention_line(deletion) << "\n";
        });
        std::cout << (dry_run ? "dry run: " : "") << "retention: " << applied.tags_deleted << " tags, "
                  << applied.manifests_deleted << " manifests of " << applied.repositories << " repositories ("
                  << applied.tags_evaluated << " tags judged)";
        if (applied.unpulled_skipped)
            std::cout << "; the unpulled rule was not applied to " << applied.unpulled_skipped << " repositories";
        std::cout << "\n";
    }
    auto report = registry::collect_garbage(blobs, *meta, clock, replica, config.gc, dry_run);
    for (auto& line : report.removed) std::cout << (dry_run ? "would remove " : "removed ") << line << "\n";
    std::cout << (dry_run ? "dry run: " : "") << report.manifests << " manifests, " << report.links << " links, "
              << report.blobs << " blobs (" << report.bytes_freed << " bytes); kept " << report.blobs_kept << " blobs ("
              << report.bytes_kept << " bytes)\n";
    return 0;
}

}  // namespace berth::cli
