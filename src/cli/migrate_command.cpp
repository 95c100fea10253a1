// berth migrate --to-s3: a replica's blob files copied into the bucket its next start uses.
#include <csignal>
#include <iostream>

#include "berth/config/config.hpp"
#include "berth/s3/blob_store.hpp"
#include "berth/s3/migration.hpp"
#include "berth/storage/blob_store.hpp"
#include "commands.hpp"

namespace berth::cli {
namespace {

constexpr const char* migrate_help = R"(Usage: berth migrate --to-s3 --config FILE [--root DIR] [--parallel N]

Copies a replica's blobs from its files store (<root>/blobs) into the bucket
that FILE's storage.blobs names, while the replica goes on serving from its
files: FILE is the configuration it will be restarted with.

Each blob file is verified against its digest and uploaded unless the bucket
holds it whole already; nothing in <root> changes. Then restart the replica
with FILE: its first start on the bucket copies what was pushed since, and
removes the files. Run it again at any time: what is there is skipped.

  --parallel N   blobs copied at once (default 4)

Exit status: 0 when every sound blob is in the bucket; 1 when some could not be
copied (the bucket refused or was away: run it again) or some are corrupt (they
are not copied; the replica's scrub gets them back from a peer).
)";

std::atomic<bool> interrupted{false};

}  // namespace

int migrate(const std::vector<std::string>& args) {
    auto arguments = parse_arguments(args, {"--config", "--root", "--parallel"}, {"--to-s3"});
    if (arguments.help) {
        std::cout << migrate_help;
        return 0;
    }
    if (!arguments.rest.empty()) throw UsageError("unexpected argument " + arguments.rest.front());
    if (!arguments.flag("--to-s3")) throw UsageError("--to-s3 is required (the one migration there is)");
    auto config = config::load_config(arguments.required("--config"));
    if (auto root = arguments.value("--root")) config.root = *root;
    if (!config.s3_blobs) throw UsageError("the configuration has no storage.blobs of type s3");
    if (!storage::FileBlobStore::holds_blobs(config.root)) {
        std::cout << "no blob files under " << config.root.string() << ": nothing to copy\n";
        return 0;
    }
    unsigned parallel = 4;
    if (auto value = arguments.value("--parallel")) {
        try {
            parallel = static_cast<unsigned>(std::stoul(*value));
        } catch (const std::exception&) {
            parallel = 0;
        }
        if (parallel < 1 || parallel > 64) throw UsageError("--parallel is 1 to 64");
    }
    // Beside a running replica: no cache of its own (the replica's start empties the cache).
    auto options = *config.s3_blobs;
    options.cache_bytes = 0;
    s3::S3BlobStore bucket(config.root, options, storage::StoreUse::beside);
    std::signal(SIGINT, [](int) { interrupted = true; });
    std::signal(SIGTERM, [](int) { interrupted = true; });
    std::size_t shown = 0;
    auto progress = [&shown](const s3::MigrationReport& so_far) {
        const auto done = so_far.copied + so_far.present + so_far.corrupt.size() + so_far.failed.size();
        if (done - shown < 100) return;
        shown = done;
        std::cerr << done << " of " << so_far.blobs << " blobs\n";
    };
    auto report =
        s3::move_files_into(bucket, config.root, {.parallel = parallel, .stop = &interrupted, .progress = progress});
    for (auto& digest : report.corrupt) std::cout << "corrupt, not copied: " << digest << "\n";
    for (auto& digest : report.failed) std::cout << "not copied: " << digest << "\n";
    std::cout << report.copied << " blobs copied (" << report.bytes_copied << " bytes), " << report.present
              << " in the bucket already, " << report.corrupt.size() << " corrupt, " << report.failed.size()
              << " not copied, of " << report.blobs << "\n";
    if (interrupted) std::cout << "interrupted: run it again to go on\n";
    return report.corrupt.empty() && report.failed.empty() && !interrupted ? 0 : 1;
}

}  // namespace berth::cli
