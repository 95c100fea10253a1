// berth-retention-bench: how long a retention round takes over many tags of
// one repository, and what it costs in CPU and memory (docs/retention.md).
//
//   berth-retention-bench [--tags N] [--dir DIR] [--delete]
//
// Writes N tags (default 1,000,000) into a fresh store in DIR (default a
// temporary directory, removed after), each pointing at one of 1,000
// manifests, half of them pulled recently. Then it times three rounds:
//   judge      expire_unpulled 30 days: every tag judged, none old enough to go
//   dry run    keep_last 1000 + expire_unpulled 0 s: every tag neither among
//              the newest nor pulled would go (reported, not deleted)
//   delete     (with --delete) the same for real: tombstones, a chunk at a time
// and prints wall time, CPU time and the process's peak RSS after each.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <string>

#include "berth/registry/retention.hpp"
#include "berth/storage/hybrid_clock.hpp"
#include "berth/storage/meta_store.hpp"
#include "berth/storage/pull_times.hpp"
#include "process_usage.hpp"

using namespace berth;
using bench::cpu_seconds;
using bench::peak_rss_mib;

namespace {

void measure(const char* what, const std::function<registry::RetentionReport()>& run) {
    const auto cpu = cpu_seconds();
    const auto started = std::chrono::steady_clock::now();
    auto report = run();
    const auto wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::printf("%-8s %9zu tags judged, %9zu deleted: %6.2f s wall, %6.2f s CPU, peak RSS %ld MiB\n", what,
                report.tags_evaluated, report.tags_deleted, wall, cpu_seconds() - cpu, peak_rss_mib());
}

}  // namespace

int main(int argc, char** argv) {
    std::size_t count = 1'000'000;
    std::filesystem::path dir;
    bool remove_dir = true, delete_round = false;
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        if (arg == "--tags" && i + 1 < argc) count = std::stoul(argv[++i]);
        else if (arg == "--dir" && i + 1 < argc) dir = argv[++i], remove_dir = false;
        else if (arg == "--delete") delete_round = true;
        else {
            std::cerr << "usage: berth-retention-bench [--tags N] [--dir DIR] [--delete]\n";
            return 2;
        }
    }
    if (dir.empty())
        dir = std::filesystem::temp_directory_path() / ("berth-retention-bench-" + std::to_string(getpid()));
    {
        storage::MetaStore meta(dir / "meta");
        storage::HybridClock clock(storage::system_wall_clock());
        storage::PullTimes pulls(meta);
        const auto now_ms = static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
                .count());

        const auto populate_started = std::chrono::steady_clock::now();
        for (std::size_t done = 0; done < count;) {
            storage::MetaStore::Batch batch;
            for (std::size_t n = 0; n < 10000 && done < count; ++n, ++done) {
                char digest[80];
                std::snprintf(digest, sizeof digest, "sha256:%064zx", done % 1000);
                const auto tag = "tag-" + std::to_string(done);
                batch.record_tag("bench/app", tag, digest, {clock.now(), "bench"});
                if (done % 2) pulls.pulled("bench/app", tag, now_ms);
            }
            meta.commit(batch, storage::MetaStore::Durability::none);
            pulls.flush();
        }
        std::printf("populated %zu tags in %.1f s, peak RSS %ld MiB\n", count,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - populate_started).count(),
                    peak_rss_mib());

        const auto now = std::chrono::system_clock::now();  // every tag pushed before it
        auto round = [&](registry::RetentionPolicy policy, bool dry_run) {
            policy.name = "bench";
            policy.repositories = {"bench/**"};
            registry::RetentionOptions options;
            options.policies = {policy};
            registry::Retention retention(options, meta, clock, "bench", pulls);
            std::size_t told = 0;
            auto report = retention.run(
                dry_run, [&](const registry::RetentionDeletion&) { ++told; }, now + std::chrono::milliseconds(1));
            if (dry_run) report.tags_deleted = told;
            return report;
        };
        registry::RetentionPolicy judge;
        judge.expire_unpulled = std::chrono::seconds(30 * 86400);
        measure("judge", [&] { return round(judge, true); });
        registry::RetentionPolicy prune;
        prune.keep_last = 1000;
        prune.expire_unpulled = std::chrono::seconds(0);
        measure("dry run", [&] { return round(prune, true); });
        if (delete_round) measure("delete", [&] { return round(prune, false); });
    }
    if (remove_dir) std::filesystem::remove_all(dir);
    return 0;
}
