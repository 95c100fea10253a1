// berth backup, backup verify, backup prune, restore (docs/backup.md). None needs a configuration
// file: a backup opens the index read-only, so it works beside a running berth.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "berth/oci/json.hpp"
#include "berth/net/client.hpp"
#include "berth/net/host_port.hpp"
#include "berth/net/resolve.hpp"
#include "berth/storage/backup.hpp"
#include "berth/storage/blob_store.hpp"
#include "berth/storage/layout.hpp"
#include "berth/storage/meta_store.hpp"
#include "commands.hpp"

namespace berth::cli {

namespace {

namespace fs = std::filesystem;

constexpr const char* backup_help = R"(Usage: berth backup --root DIR --to TARGET [--incremental]
       berth backup --url URL --secret-file FILE [--ca-file FILE]
       berth backup verify TARGET
       berth backup prune TARGET --keep N

Takes a consistent backup of the store in DIR while it serves: the index as of
one moment, then every blob file, hard-linked when TARGET is on the same file
system, copied and verified otherwise. TARGET is content-addressed: the first
backup into it is full, --incremental adds one that copies only new blobs.
--url asks a running berth to take one into its configured backup.target
(POST /_berth/v1/backup with backup.secret_file's secret) and waits for it.
verify re-hashes every blob and checks every backup (exit 1 on any damage);
prune keeps the newest N backups and the blobs they hold. docs/backup.md.
)";

constexpr const char* restore_help = R"(Usage: berth restore --from TARGET --root DIR [--backup ID] [--as-new-replica]

Rebuilds a store in DIR (which must hold none) from a backup in TARGET (the
newest unless --backup names one). Its peers then catch up from it, and it from
them, as with any replica that was away. When a replica the backed-up one was
configured with still answers, restoring is refused unless --as-new-replica:
the cluster's newer state then wins over the backup's wherever they differ.
docs/backup.md.
)";

void show(const storage::BackupProgress& progress) {
    if (!isatty(STDERR_FILENO)) return;
    std::cerr << "\r" << progress.stage << ": " << progress.blobs << " blobs, " << (progress.bytes >> 20) << " MiB"
              << (progress.stage == "done" ? "\n" : "") << std::flush;
}

int take(const Arguments& arguments) {
    const fs::path root = arguments.required("--root"), target = arguments.required("--to");
    if (!fs::exists(storage::layout::meta_dir(root))) throw UsageError("no registry store at " + root.string());
    storage::MetaStore meta(storage::layout::meta_dir(root), storage::MetaStore::Mode::read_only);
    // Repositories but no blob file: the blobs are in a bucket, which only the server is configured for.
    if (!storage::FileBlobStore::holds_blobs(root) && !meta.repositories("", 1).empty())
        throw UsageError(root.string() +
                         " keeps its blobs in a bucket (storage.blobs): the server takes its backups (the backup "
                         "section, POST /_berth/v1/backup)");
    storage::FileBlobStore blobs(root, storage::StoreUse::beside);
    const auto started = std::chrono::steady_clock::now();
    auto report = storage::take_backup(meta, blobs, target, arguments.flag("--incremental"), show);
    const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::cout << (report.incremental ? "incremental" : "full") << " backup " << report.id << " in "
              << report.dir.string() << ": index at change " << report.log_head << ", " << report.blobs << " blobs ("
              << report.bytes << " bytes), " << report.copied << " new (" << report.copied_bytes << " bytes) in "
              << seconds << " s\n";
    if (report.damaged)
        std::cerr << "berth backup: " << report.damaged
                  << " blob files in the store do not match their digest and were left out (berth gc; scrub)\n";
    return report.damaged ? 1 : 0;
}

// Asks a running berth for a backup and waits until it has ended.
int ask_server(const Arguments& arguments) {
    const auto url = net::parse_url(arguments.required("--url"));
    std::ifstream file(arguments.required("--secret-file"));
    std::string secret;
    if (!file || !std::getline(file, secret) || secret.empty())
        throw UsageError("cannot read a secret from " + arguments.required("--secret-file"));
    net::Origin origin{url.address, {}};
    origin.tls.enabled = url.tls;
    origin.tls.ca_file = arguments.value("--ca-file").value_or("");
    net::Client client;
    const net::Headers headers{{"Authorization", "Bearer " + secret}};
    const auto path = url.path_prefix + "/_berth/v1/backup";
    auto started = client.request(origin, {"POST", path, headers, std::nullopt, false, std::nullopt});
    if (started.status != 202 && started.status != 409)
        throw storage::BackupError("POST " + path + " answered " + std::to_string(started.status) + ": " +
                                   started.body.substr(0, 300));
    // 409: one was under way already; its end is this one's answer too.
    for (;;) {
        auto status = client.request(origin, {"GET", path, headers, std::nullopt, false, std::nullopt});
        auto state = oci::parse_json(status.body);
        if (status.status != 200 || !state.is_object())
            throw storage::BackupError("GET " + path + " answered " + std::to_string(status.status));
        if (state.value("state", "") != "running") {
            std::cout << state.dump() << "\n";
            return state.value("state", "") == "succeeded" ? 0 : 1;
        }
        std::this_thread::sleep_for(std::chrono::seconds(1));  // a poll of a job that takes minutes
    }
}

int verify(const Arguments& arguments) {
    if (arguments.rest.size() != 2) throw UsageError("name the target: berth backup verify TARGET");
    auto report = storage::verify_backups(arguments.rest[1], show);
    for (auto& damage : report.damage) std::cout << "DAMAGED " << damage << "\n";
    std::cout << report.backups << " backups, " << report.blobs << " blobs (" << report.bytes << " bytes) checked: "
              << (report.damage.empty() ? "intact" : std::to_string(report.damage.size()) + " problems") << "\n";
    return report.damage.empty() ? 0 : 1;
}

int prune(const Arguments& arguments) {
    if (arguments.rest.size() != 2) throw UsageError("name the target: berth backup prune TARGET --keep N");
    const auto keep = arguments.required("--keep");
    if (keep.empty() || keep.find_first_not_of("0123456789") != std::string::npos || std::stoul(keep) == 0)
        throw UsageError("--keep needs a number of backups, at least 1");
    auto report = storage::prune_backups(arguments.rest[1], std::stoul(keep));
    for (auto& id : report.removed) std::cout << "removed backup " << id << "\n";
    std::cout << report.blobs_removed << " blob files no backup holds removed (" << report.bytes_removed << " bytes)\n";
    return 0;
}

}  // namespace

int backup(const std::vector<std::string>& args) {
    auto arguments =
        parse_arguments(args, {"--root", "--to", "--keep", "--url", "--secret-file", "--ca-file"}, {"--incremental"});
    if (arguments.help) {
        std::cout << backup_help;
        return 0;
    }
    try {
        if (!arguments.rest.empty() && arguments.rest.front() == "verify") return verify(arguments);
        if (!arguments.rest.empty() && arguments.rest.front() == "prune") return prune(arguments);
        if (!arguments.rest.empty()) throw UsageError("unexpected argument " + arguments.rest.front());
        if (arguments.value("--url")) return ask_server(arguments);
        return take(arguments);
    } catch (const storage::BackupError& error) {
        std::cerr << "berth backup: " << error.what() << "\n";
        return 1;
    } catch (const net::Error& error) {
        std::cerr << "berth backup: " << error.what() << "\n";
        return 1;
    }
}

int restore(const std::vector<std::string>& args) {
    auto arguments = parse_arguments(args, {"--from", "--root", "--backup"}, {"--as-new-replica"});
    if (arguments.help) {
        std::cout << restore_help;
        return 0;
    }
    if (!arguments.rest.empty()) throw UsageError("unexpected argument " + arguments.rest.front());
    const fs::path target = arguments.required("--from"), root = arguments.required("--root");
    try {
        auto ids = storage::backup_ids(target);
        if (ids.empty()) throw storage::BackupError(target.string() + " holds no backup");
        const auto id = arguments.value("--backup").value_or(ids.back());
        if (std::find(ids.begin(), ids.end(), id) == ids.end())
            throw storage::BackupError(target.string() + " holds no backup " + id);
        if (!arguments.flag("--as-new-replica"))
            for (auto& peer : storage::backup_peers(target, id))
                if (net::accepts_connections(peer, std::chrono::seconds(2))) {
                    std::cerr << "berth restore: " << peer
                              << ", a replica of this one's cluster, is running: restoring would bring back what the "
                                 "cluster has changed or deleted since the backup only where it has not. Stop every "
                                 "replica to restore the cluster to the backup, or pass --as-new-replica to join it.\n";
                    return 1;
                }
        auto report = storage::restore_backup(target, id, root, show);
        if (report.blobs_in_bucket)
            std::cout << "restored backup " << report.id << " into " << root.string() << ": the index; its "
                      << report.blobs << " blobs (" << report.bytes << " bytes) are in the bucket it was taken on: "
                      << "start it with the same storage.blobs. Its log starts anew, so peers catch up from it\n";
        else
            std::cout << "restored backup " << report.id << " into " << root.string() << ": " << report.blobs
                      << " blobs (" << report.bytes << " bytes, " << report.linked
                      << " hard-linked); its log starts anew, so peers catch up from it\n";
        return 0;
    } catch (const storage::BackupError& error) {
        std::cerr << "berth restore: " << error.what() << "\n";
        return 1;
    }
}

}  // namespace berth::cli
