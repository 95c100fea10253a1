// berth: the command line. node/ builds and runs what `berth serve` serves.
#include <csignal>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "berth/auth/credential_provider.hpp"
#include "berth/config/config.hpp"
#include "berth/node/node.hpp"
#include "berth/registry/maintenance.hpp"
#include "berth/registry/retention.hpp"
#include "berth/storage/blob_store.hpp"
#include "berth/storage/hybrid_clock.hpp"
#include "berth/storage/layout.hpp"
#include "berth/storage/meta_store.hpp"
#include "berth/storage/pull_times.hpp"
#include "cli/commands.hpp"

namespace layout = berth::storage::layout;

namespace {

constexpr const char* usage_text = R"(berth — an OCI distribution-spec registry

Usage:
  berth serve [--config FILE] [--listen HOST:PORT] [--root DIR]
  berth gc [--config FILE] [--root DIR] [--dry-run]
  berth lineage --root DIR [--json] REPOSITORY[:TAG|@DIGEST]
  berth backup --root DIR --to TARGET [--incremental]
  berth backup verify TARGET
  berth backup prune TARGET --keep N
  berth restore --from TARGET --root DIR [--backup ID] [--as-new-replica]
  berth import (--root DIR | --url URL) SOURCE... [--repository R] [--repository-prefix P]
  berth export (--root DIR | --url URL) REPOSITORY[:TAG|@DIGEST]... --to DIR|FILE.tar [--since TIME]
  berth credential-provider [--registry HOST[:PORT]]... [--username NAME]
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
    if (flags.listen) berth::config::apply_listen(config, *flags.listen);
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
    berth::registry::Retention retention(config.retention, *meta, clock, replica, pulls,
                                         {.unreachable = config.replication.enabled()});
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
    return berth::node::serve(load(flags));
}

constexpr const char* credential_provider_help =
    R"(Usage: berth credential-provider [--registry HOST[:PORT]]... [--username NAME]

The kubelet's image credential provider (credentialprovider.kubelet.k8s.io/v1):
reads a CredentialProviderRequest on stdin and writes a CredentialProviderResponse
giving the pod's service account token as the password for each --registry (the
replicas' Service, the node agent, mirrored upstream hosts; default: the image's
own registry). k8s/node/credential-provider-config.yaml shows the kubelet side.
)";

int credential_provider(const std::vector<std::string>& args) {
    berth::auth::CredentialProviderOptions options;
    for (std::size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "-h" || args[i] == "--help") {
            std::cout << credential_provider_help;
            return 0;
        }
        if ((args[i] == "--registry" || args[i] == "--username") && i + 1 < args.size()) {
            (args[i] == "--registry" ? options.registries.emplace_back() : options.username) = args[i + 1];
            ++i;
            continue;
        }
        std::cerr << "berth credential-provider: unexpected argument '" << args[i] << "'\n\n"
                  << credential_provider_help;
        return 2;
    }
    std::string request(berth::auth::max_credential_request_bytes + 1, '\0');
    std::cin.read(request.data(), static_cast<std::streamsize>(request.size()));
    request.resize(static_cast<std::size_t>(std::cin.gcount()));
    try {
        std::cout << berth::auth::credential_provider_response(request, options, std::chrono::system_clock::now())
                  << "\n";
    } catch (const std::invalid_argument& error) {
        std::cerr << "berth credential-provider: " << error.what() << "\n";
        return 1;
    }
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
        if (args[0] == "lineage") return berth::cli::lineage({args.begin() + 1, args.end()});
        if (args[0] == "backup") return berth::cli::backup({args.begin() + 1, args.end()});
        if (args[0] == "restore") return berth::cli::restore({args.begin() + 1, args.end()});
        if (args[0] == "import") return berth::cli::import({args.begin() + 1, args.end()});
        if (args[0] == "export") return berth::cli::export_images({args.begin() + 1, args.end()});
        if (args[0] == "credential-provider") return credential_provider({args.begin() + 1, args.end()});
        std::cerr << "berth: unknown command '" << args[0] << "'\n\n" << usage_text;
        return 2;
    } catch (const berth::config::ConfigError& error) {
        std::cerr << "berth: " << error.what() << "\n";
        return 2;
    } catch (const berth::cli::UsageError& error) {
        std::cerr << "berth " << args[0] << ": " << error.what() << " (see berth " << args[0] << " --help)\n";
        return 2;
    } catch (const std::exception& error) {
        std::cerr << "berth: " << error.what() << "\n";
        return 1;
    }
}
