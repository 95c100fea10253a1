// berth-ui-bench: the web UI's three page views (docs/ui.md) over a store of many manifests: each
// must answer in under 50 ms server-side with 1,000,000 manifests in the store.
//
//   berth-ui-bench [--manifests N] [--dir DIR] [--runs R]
//
// Writes N image manifests (default 1,000,000) into a fresh store in DIR (default a temporary
// directory, removed after) through the registry's own batches (links with sizes, tags, so every
// total is kept as a push keeps it): 10,000 repositories of N/10,000 tagged images each, plus
// many/tags with 10,000 tags, wide/app with one image of 1,000 layers, and multi/app with a
// two-platform index; config blobs of the images viewed are on disk. Then it times what each
// ui/api view does (ui/views.hpp over registry::Contents, no HTTP), R runs each (default 20), with a pull predicate
// like the rules' (a glob per namespace), and prints the median and the slowest run.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "berth/oci/manifest.hpp"
#include "berth/registry/registry.hpp"
#include "berth/storage/blob_store.hpp"
#include "berth/storage/hybrid_clock.hpp"
#include "berth/storage/layout.hpp"
#include "berth/storage/meta_store.hpp"
#include "berth/ui/views.hpp"
#include "process_usage.hpp"

using namespace berth;

namespace {

std::string fake_digest(const char* kind, std::size_t n) {
    char digest[80];
    std::snprintf(digest, sizeof digest, "sha256:%s%058zx", kind, n);
    return digest;
}

struct Image {
    std::string bytes;
    std::vector<std::pair<std::string, std::uint64_t>> blobs;  // config and layers, with sizes
};

Image image(const std::string& config, std::size_t config_size, const std::vector<std::string>& layers) {
    Image out;
    out.bytes = R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",)"
                R"("config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":")" +
                config + R"(","size":)" + std::to_string(config_size) + R"(},"layers":[)";
    out.blobs.emplace_back(config, config_size);
    for (std::size_t i = 0; i < layers.size(); ++i) {
        out.bytes += std::string(i ? "," : "") +
                     R"({"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":")" + layers[i] +
                     R"(","size":1048576})";
        out.blobs.emplace_back(layers[i], 1048576);
    }
    out.bytes += R"(],"annotations":{"org.opencontainers.image.source":"https://example.com/app"}})";
    return out;
}

// A config blob as a build writes it, on disk where the registry reads it.
std::pair<std::string, std::size_t> write_config(const std::filesystem::path& root, std::size_t n) {
    std::string text = R"({"created":"2026-11-26T00:00:00Z","architecture":"amd64","os":"linux","config":{)"
                       R"("Env":["PATH=/usr/bin","N=)" +
                       std::to_string(n) + R"("],"Entrypoint":["/app"],"Labels":{"team":"bench"}},"history":[)";
    for (int i = 0; i < 20; ++i)
        text += std::string(i ? "," : "") + R"({"created_by":"RUN step )" + std::to_string(i) + R"("})";
    text += "]}";
    auto digest = oci::Digest::of(oci::DigestAlgorithm::sha256, text);
    auto file = storage::layout::blob_file(storage::layout::blobs_dir(root), digest);
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file, std::ios::binary) << text;
    return {digest.str(), text.size()};
}

void time_view(const char* what, std::size_t runs, const std::function<std::size_t()>& view) {
    std::vector<double> ms;
    std::size_t bytes = 0;
    for (std::size_t i = 0; i < runs; ++i) {
        const auto started = std::chrono::steady_clock::now();
        bytes = view();
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count());
    }
    std::sort(ms.begin(), ms.end());
    std::printf("%-44s median %7.2f ms, slowest %7.2f ms, %7zu bytes of JSON\n", what, ms[ms.size() / 2], ms.back(),
                bytes);
}

}  // namespace

int main(int argc, char** argv) {
    std::size_t count = 1'000'000, runs = 20;
    std::filesystem::path dir;
    bool remove_dir = true;
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        if (arg == "--manifests" && i + 1 < argc) count = std::stoul(argv[++i]);
        else if (arg == "--runs" && i + 1 < argc) runs = std::max<std::size_t>(1, std::stoul(argv[++i]));
        else if (arg == "--dir" && i + 1 < argc) dir = argv[++i], remove_dir = false;
        else {
            std::cerr << "usage: berth-ui-bench [--manifests N] [--dir DIR] [--runs R]\n";
            return 2;
        }
    }
    if (dir.empty()) dir = std::filesystem::temp_directory_path() / ("berth-ui-bench-" + std::to_string(getpid()));
    {
        storage::FileBlobStore blobs(dir);
        storage::MetaStore meta(storage::layout::meta_dir(dir));
        storage::HybridClock clock(storage::system_wall_clock());
        registry::Registry registry({}, blobs, meta, clock);
        auto put = [&](storage::MetaStore::Batch& batch, const std::string& repo, const std::string& tag,
                       const Image& img, const char* media_type = "") {
            const storage::Stamp stamp{clock.now(), "bench"};
            for (auto& [digest, size] : img.blobs) batch.record_link(repo, digest, stamp, false, size);
            auto digest = oci::Digest::of(oci::DigestAlgorithm::sha256, img.bytes);
            batch.record_manifest(repo, digest, oci::parse_manifest(img.bytes, media_type), img.bytes, stamp);
            if (!tag.empty()) batch.record_tag(repo, tag, digest.str(), stamp);
            return digest.str();
        };
        const auto populate_started = std::chrono::steady_clock::now();
        const auto viewed_config = write_config(dir, 0);
        std::size_t written = 0;
        auto commit = [&](storage::MetaStore::Batch& batch) {
            meta.commit(batch, storage::MetaStore::Durability::none);
        };
        {
            storage::MetaStore::Batch batch;
            std::vector<std::string> layers;
            for (std::size_t i = 0; i < 1000; ++i) layers.push_back(fake_digest("f1f1f1", i));
            put(batch, "wide/app", "1", image(viewed_config.first, viewed_config.second, layers));
            std::string index =
                R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[)";
            for (const char* arch : {"amd64", "arm64"}) {
                auto child = image(viewed_config.first, viewed_config.second,
                                   {fake_digest("a1a1a1", 0), fake_digest(arch[1] == 'm' ? "a2a2a2" : "a3a3a3", 0)});
                auto digest = put(batch, "multi/app", "", child);
                index += std::string(arch[1] == 'm' ? "" : ",") +
                         R"({"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":")" + digest +
                         R"(","size":)" + std::to_string(child.bytes.size()) +
                         R"(,"platform":{"os":"linux","architecture":")" + arch + R"("}})";
            }
            index += "]}";
            put(batch, "multi/app", "1", {index, {}}, "application/vnd.oci.image.index.v1+json");
            commit(batch);
            written += 4;
        }
        for (std::size_t done = 0; done < 10000;) {
            storage::MetaStore::Batch batch;
            for (std::size_t n = 0; n < 5000 && done < 10000; ++n, ++done, ++written)
                put(batch, "many/tags", "v" + std::to_string(done),
                    image(fake_digest("c0c0c0", done), 1500, {fake_digest("b0b0b0", 0), fake_digest("e0e0e0", done)}));
            commit(batch);
        }
        for (std::size_t done = 0; written < count;) {
            storage::MetaStore::Batch batch;
            for (std::size_t n = 0; n < 5000 && written < count; ++n, ++done, ++written) {
                char repo[32];
                std::snprintf(repo, sizeof repo, "ns%02zu/r%05zu", done % 100, done % 10000);
                put(batch, repo, "t" + std::to_string(done / 10000),
                    image(done % 10000 == 42 ? viewed_config.first : fake_digest("c1c1c1", done),
                          done % 10000 == 42 ? viewed_config.second : 1500,
                          {fake_digest("b1b1b1", done % 100), fake_digest("d0d0d0", done)}));
            }
            commit(batch);
        }
        meta.sync();
        std::printf("populated %zu manifests in %.1f s, peak RSS %ld MiB\n", written,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - populate_started).count(),
                    bench::peak_rss_mib());

        // A pull rule per namespace, as auth.rules would have: half the namespaces visible.
        registry::MayPull may_pull = [](const std::string& repo) {
            return repo.starts_with("many/") || repo.starts_with("wide/") || repo.starts_with("multi/") ||
                   (repo.size() > 3 && (repo[3] - '0') % 2 == 0);
        };
        const auto contents = registry.contents();
        time_view("repositories: first page of 50", runs, [&] {
            return ui::repositories_json(contents, {"", "", 50, nullptr}, may_pull).size();
        });
        time_view("repositories: a page in the middle", runs, [&] {
            return ui::repositories_json(contents, {"", "ns50/r05000", 50, nullptr}, may_pull).size();
        });
        time_view("repositories: search \"r0424\" (10 of 10,003)", runs, [&] {
            return ui::repositories_json(contents, {"r0424", "", 50, nullptr}, may_pull).size();
        });
        time_view("repository: 100 tags of ns42/r00042", runs, [&] {
            return ui::repository_json(contents, {"ns42/r00042", "", 100}).size();
        });
        time_view("repository: many/tags, first 100 of 10,000", runs, [&] {
            return ui::repository_json(contents, {"many/tags", "", 100}).size();
        });
        time_view("repository: many/tags, 100 after v5000", runs, [&] {
            return ui::repository_json(contents, {"many/tags", "v5000", 100}).size();
        });
        time_view("manifest: ns42/r00042:t0 with its config", runs,
                  [&] { return ui::manifest_json(contents, "ns42/r00042", "t0", may_pull).size(); });
        time_view("manifest: multi/app:1, a two-platform index", runs,
                  [&] { return ui::manifest_json(contents, "multi/app", "1", may_pull).size(); });
        time_view("manifest: wide/app:1, 1,000 layers", runs,
                  [&] { return ui::manifest_json(contents, "wide/app", "1", may_pull).size(); });
        std::printf("peak RSS %ld MiB\n", bench::peak_rss_mib());
    }
    if (remove_dir) std::filesystem::remove_all(dir);
    return 0;
}
