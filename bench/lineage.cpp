// berth-lineage-bench: "what is built on this base?" over a store of many manifests
// (docs/policies.md), and what it costs to index such a store once (an upgrade).
//
//   berth-lineage-bench [--manifests N] [--dir DIR]
//
// Writes N image manifests (default 1,000,000) into a fresh store in DIR (default a temporary
// directory, removed after), spread over 10,000 repositories. base/debian:bookworm has had 10
// versions, each one layer more than the last; every tenth manifest is built on one of them
// (two layers of its own), the others on 100 unrelated bases. Then it times:
//   page        GET /_berth/v1/lineage's work for the first page of 100, cold and warm
//   walk        every page of 1,000 until the end: all derived images listed
//   probe       what a push under base_images asks: its layer list's prefixes, longest first
//   index       the start-up indexing of a store written before the lineage index
// and prints wall time, CPU time and the process's peak RSS after each.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <string>

#include "berth/oci/manifest.hpp"
#include "berth/registry/lineage.hpp"
#include "berth/storage/hybrid_clock.hpp"
#include "berth/storage/layout.hpp"
#include "berth/storage/meta_store.hpp"
#include "process_usage.hpp"

using namespace berth;
using bench::cpu_seconds;
using bench::peak_rss_mib;

namespace {

void measure(const char* what, const std::function<std::string()>& run) {
    const auto cpu = cpu_seconds();
    const auto started = std::chrono::steady_clock::now();
    auto result = run();
    const auto wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::printf("%-12s %-34s %8.3f s wall, %8.3f s CPU, peak RSS %ld MiB\n", what, result.c_str(), wall,
                cpu_seconds() - cpu, peak_rss_mib());
}

std::string layer(const char* kind, std::size_t n) {
    char digest[80];
    std::snprintf(digest, sizeof digest, "sha256:%s%058zx", kind, n);
    return digest;
}

std::string image(const std::vector<std::string>& layers, std::size_t nonce) {
    std::string out = R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",)"
                      R"("config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":")" +
                      layer("c0c0c0", nonce) + R"(","size":100},"layers":[)";
    for (std::size_t i = 0; i < layers.size(); ++i)
        out += std::string(i ? "," : "") + R"({"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":")" +
               layers[i] + R"(","size":1000})";
    return out + "]}";
}

// The layers of base/debian:bookworm's version v (0..9): v + 1 of them.
std::vector<std::string> bookworm(std::size_t version) {
    std::vector<std::string> out;
    for (std::size_t i = 0; i <= version; ++i) out.push_back(layer("b0b0b0", i));
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    std::size_t count = 1'000'000;
    std::filesystem::path dir;
    bool remove_dir = true;
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        if (arg == "--manifests" && i + 1 < argc) count = std::stoul(argv[++i]);
        else if (arg == "--dir" && i + 1 < argc) dir = argv[++i], remove_dir = false;
        else {
            std::cerr << "usage: berth-lineage-bench [--manifests N] [--dir DIR]\n";
            return 2;
        }
    }
    if (dir.empty()) dir = std::filesystem::temp_directory_path() / ("berth-lineage-bench-" + std::to_string(getpid()));
    {
        storage::MetaStore meta(dir / "meta");
        storage::HybridClock clock(storage::system_wall_clock());
        auto put = [&](storage::MetaStore::Batch& batch, const std::string& repo, const std::string& tag,
                       const std::string& bytes) {
            auto digest = oci::Digest::of(oci::DigestAlgorithm::sha256, bytes);
            batch.record_manifest(repo, digest, oci::parse_manifest(bytes, ""), bytes, {clock.now(), "bench"});
            batch.record_tag(repo, tag, digest.str(), {clock.now(), "bench"});
        };
        const auto populate_started = std::chrono::steady_clock::now();
        {
            storage::MetaStore::Batch batch;
            for (std::size_t v = 0; v < 10; ++v) put(batch, "base/debian", "bookworm", image(bookworm(v), v));
            meta.commit(batch, storage::MetaStore::Durability::none);
        }
        std::size_t derived = 0;
        for (std::size_t done = 0; done < count;) {
            storage::MetaStore::Batch batch;
            for (std::size_t n = 0; n < 5000 && done < count; ++n, ++done) {
                auto layers = done % 10 == 0 ? bookworm(done / 10 % 10) : std::vector{layer("a0a0a0", done % 100)};
                if (done % 10 == 0) ++derived;
                layers.push_back(layer("d0d0d0", done * 2));
                layers.push_back(layer("d0d0d0", done * 2 + 1));
                char repo[32];
                std::snprintf(repo, sizeof repo, "fill/r%05zu", done % 10000);
                put(batch, repo, "t" + std::to_string(done), image(layers, done));
            }
            meta.commit(batch, storage::MetaStore::Durability::none);
        }
        meta.sync();
        std::printf("populated %zu manifests (%zu on base/debian:bookworm) in %.1f s, peak RSS %ld MiB\n", count,
                    derived, std::chrono::duration<double>(std::chrono::steady_clock::now() - populate_started).count(),
                    peak_rss_mib());

        registry::LineageQuery query{"base/debian", "bookworm", {}, 100, nullptr};
        for (const char* what : {"page cold", "page warm"})
            measure(what, [&] {
                auto page = registry::lineage(meta, query);
                return std::to_string(page.derived.size()) + " derived, " + std::to_string(page.versions.size()) +
                       " versions";
            });
        measure("walk", [&] {
            auto walk = query;
            walk.limit = 1000;
            std::size_t listed = 0, pages = 0;
            for (;;) {
                auto page = registry::lineage(meta, walk);
                listed += page.derived.size();
                ++pages;
                if (!page.next) break;
                walk.after = *page.next;
            }
            return std::to_string(listed) + " derived in " + std::to_string(pages) + " pages";
        });
        measure("probe x1000", [&] {
            std::size_t found = 0;
            for (std::size_t i = 0; i < 1000; ++i) {
                auto layers = bookworm(i % 10);
                layers.push_back(layer("e0e0e0", i));  // a new push: its own layer, then the base's
                for (std::size_t n = layers.size(); n > 0; --n)
                    if (!meta.with_layers({layers.begin(), layers.begin() + static_cast<std::ptrdiff_t>(n)}, 64)
                             .empty()) {
                        ++found;
                        break;
                    }
            }
            return std::to_string(found) + " bases found";
        });
    }
    {
        // A store an older berth wrote: indexed once at the next start.
        storage::MetaStore meta(dir / "meta");
        meta.put_setting(storage::layout::setting::lineage_indexed, "0");
    }
    {
        storage::MetaStore meta(dir / "meta");
        measure("index", [&] {
            meta.index_lineage();
            return std::string("every manifest and tag");
        });
    }
    if (remove_dir) std::filesystem::remove_all(dir);
    return 0;
}
