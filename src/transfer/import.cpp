// berth import (transfer.hpp): OCI image layouts (directories, oci-archive tarballs, a Zarf
// package's images/) and docker save archives, loaded image by image. Blobs go straight from the
// carrier into the destination, several at once, each hashed on the way; whatever is there
// already is skipped, so a run after a crash does only what is missing. An image that fails
// (a corrupt blob, a missing one) is reported and the others are loaded.
#include <unistd.h>

#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "berth/oci/json.hpp"
#include "berth/oci/manifest.hpp"
#include "berth/oci/media_types.hpp"
#include "berth/transfer/transfer.hpp"
#include "destination.hpp"
#include "files.hpp"
#include "names.hpp"

namespace berth::transfer {

namespace {

using nlohmann::json;

constexpr std::size_t max_index_bytes = 16 << 20;
constexpr std::size_t max_manifest_bytes = 4 << 20;
constexpr int max_depth = 4;  // an index of indexes of ...: deeper is refused

std::string blob_path(const oci::Digest& digest) {
    return "blobs/" + std::string(oci::algorithm_name(digest.algorithm())) + "/" + digest.hex();
}

// A blob to load: where the carrier holds it, and what it must be (digest unknown: computed).
struct Carried {
    std::string path;
    std::optional<oci::Digest> digest;
    std::uint64_t size = 0;
};

class Importer {
public:
    Importer(const ImportOptions& options, Progress& progress)
        : options_(options), progress_(progress), destination_(Destination::open(options.into)) {}

    void run(ImportReport& report) {
        for (auto& source : options_.sources) {
            try {
                auto path = source;
                // A Zarf package, unpacked: its images are an OCI layout in images/.
                if (std::filesystem::is_directory(path / "images") &&
                    std::filesystem::exists(path / "images/index.json"))
                    path /= "images";
                auto files = Files::open(path);
                if (files->exists("index.json")) load_layout(*files, report);
                else if (files->exists("manifest.json")) load_docker_archive(*files, report);
                else
                    report.failed.push_back(source.string() +
                                            ": neither an OCI image layout nor a docker save archive");
            } catch (const std::exception& error) {
                report.failed.push_back(source.string() + ": " + error.what());
            }
        }
    }

private:
    // ---- OCI image layouts

    void load_layout(const Files& files, ImportReport& report) {
        auto index = oci::parse_json(*files.read("index.json", max_index_bytes));
        if (!index.is_object() || !index.contains("manifests") || !index["manifests"].is_array())
            throw std::runtime_error("index.json is not an image index");
        std::map<std::string, std::string> repository_of;  // digest -> where it was loaded
        std::vector<json> with_subject;
        for (auto& entry : index["manifests"]) {
            std::string what = files.describe();
            try {
                auto digest = oci::Digest::parse_or_throw(entry.value("digest", ""));
                what += " " + digest.str();
                const auto media_type = entry.value("mediaType", "");
                auto name = name_of(entry);
                if (!name) {
                    if (subject_of(files, digest, media_type)) {
                        with_subject.push_back(entry);
                        continue;
                    }
                    if (options_.repository.empty())
                        throw std::runtime_error("unnamed (no org.opencontainers.image.ref.name): give --repository");
                    name = ImageName{options_.repository, ""};
                }
                const auto repo = with_prefix(options_.repository_prefix, name->repository);
                what = repo + (name->tag.empty() ? "@" + digest.str() : ":" + name->tag);
                load_manifest(files, repo, digest, media_type, name->tag, 0);
                repository_of[digest.str()] = repo;
                report.loaded.push_back(what);
            } catch (const std::exception& error) {
                report.failed.push_back(what + ": " + error.what());
            }
        }
        // Referrers (signatures, SBOMs) go where their subject went.
        for (auto& entry : with_subject) {
            std::string what = files.describe() + " " + entry.value("digest", "");
            try {
                auto digest = oci::Digest::parse_or_throw(entry.value("digest", ""));
                auto subject = subject_of(files, digest, entry.value("mediaType", ""));
                auto it = repository_of.find(subject->str());
                std::string repo = it != repository_of.end() ? it->second : options_.repository;
                if (repo.empty())
                    throw std::runtime_error("refers to " + subject->str() + ", which this import did not load");
                if (it == repository_of.end()) repo = with_prefix(options_.repository_prefix, repo);
                what = repo + "@" + digest.str();
                load_manifest(files, repo, digest, entry.value("mediaType", ""), "", 0);
                report.loaded.push_back(what);
            } catch (const std::exception& error) {
                report.failed.push_back(what + ": " + error.what());
            }
        }
    }

    // The name an index.json entry gives: a full reference in ref.name, or containerd's
    // (docker save) or Zarf's annotation; a bare tag in ref.name needs --repository.
    std::optional<ImageName> name_of(const json& entry) const {
        auto annotations = entry.value("annotations", json::object());
        if (!annotations.is_object()) return std::nullopt;
        auto text = [&](const char* key) {
            auto it = annotations.find(key);
            return it != annotations.end() && it->is_string() ? it->get<std::string>() : std::string();
        };
        for (auto* key :
             {"io.containerd.image.name", "org.opencontainers.image.ref.name", "org.opencontainers.image.base.name"}) {
            auto value = text(key);
            if (value.empty()) continue;
            auto name = parse_image_name(value);
            if (!name) throw std::runtime_error(std::string(key) + " \"" + value + "\" names nothing berth can store");
            if (name->repository.empty()) {
                if (options_.repository.empty())
                    throw std::runtime_error("\"" + value + "\" is a bare tag: give --repository");
                name->repository = options_.repository;
            }
            return name;
        }
        return std::nullopt;
    }

    std::string read_manifest(const Files& files, const oci::Digest& digest) const {
        auto bytes = files.read(blob_path(digest), max_manifest_bytes);
        if (!bytes) throw std::runtime_error("manifest " + digest.str() + " is missing from the carrier");
        if (oci::Digest::of(digest.algorithm(), *bytes) != digest)
            throw std::runtime_error("manifest " + digest.str() + " is corrupt in the carrier");
        return *bytes;
    }

    std::optional<oci::Digest> subject_of(const Files& files, const oci::Digest& digest,
                                          const std::string& media_type) const {
        auto parsed = oci::parse_manifest(read_manifest(files, digest), media_type);
        return parsed.subject ? std::optional(parsed.subject->digest) : std::nullopt;
    }

    void load_manifest(const Files& files, const std::string& repo, const oci::Digest& digest,
                       const std::string& media_type, const std::string& tag, int depth) {
        if (depth > max_depth) throw std::runtime_error("indexes nested deeper than " + std::to_string(max_depth));
        const auto bytes = read_manifest(files, digest);
        auto parsed = oci::parse_manifest(bytes, media_type);
        for (auto& child : parsed.manifests) load_manifest(files, repo, child.digest, child.media_type, "", depth + 1);
        std::vector<Carried> blobs;
        for (auto& blob : parsed.local_blobs())
            blobs.push_back({blob_path(blob.digest), blob.digest, static_cast<std::uint64_t>(blob.size)});
        load_blobs(files, repo, blobs);
        destination_->put_manifest(repo, tag.empty() ? digest.str() : tag, parsed.media_type, bytes);
        ++progress_.manifests;
    }

    // ---- docker save archives (without an OCI layout in them)

    void load_docker_archive(const Files& files, ImportReport& report) {
        auto list = oci::parse_json(*files.read("manifest.json", max_index_bytes));
        if (!list.is_array()) throw std::runtime_error("manifest.json is not a docker save manifest");
        for (auto& entry : list) {
            std::string what = files.describe();
            try {
                what += " " + entry.value("Config", "");
                load_docker_image(files, entry, report);
            } catch (const std::exception& error) {
                report.failed.push_back(what + ": " + error.what());
            }
        }
    }

    // Every blob of a docker save entry is checked against what the carrier itself says it is: the
    // config against its file name (<hex>.json, blobs/sha256/<hex>), each layer (an uncompressed
    // tar) against the config's rootfs.diff_ids entry for it.
    void load_docker_image(const Files& files, const json& entry, ImportReport& report) {
        const auto config_path = entry.value("Config", "");
        auto config = files.read(config_path, max_manifest_bytes);
        if (!config) throw std::runtime_error("its config " + config_path + " is missing");
        const auto config_digest = oci::Digest::of(oci::DigestAlgorithm::sha256, *config);
        if (config_digest != config_digest_named(config_path))
            throw std::runtime_error("its config " + config_path + " holds bytes of " + config_digest.str());
        const auto doc = oci::parse_json(*config);
        const auto rootfs = doc.is_object() ? doc.value("rootfs", json::object()) : json();
        const auto diff_ids = rootfs.is_object() ? rootfs.value("diff_ids", json::array()) : json();
        const auto listed = entry.value("Layers", json::array());
        if (!listed.is_array() || !diff_ids.is_array() || listed.size() != diff_ids.size())
            throw std::runtime_error("its layers are not the config's rootfs.diff_ids");
        std::vector<Carried> layers;
        for (std::size_t i = 0; i < listed.size(); ++i) {
            const auto path = listed[i].is_string() ? listed[i].get<std::string>() : std::string();
            auto expected = diff_ids[i].is_string() ? oci::Digest::parse(diff_ids[i].get<std::string>()) : std::nullopt;
            if (!expected || (digest_in_path(path) && digest_in_path(path) != expected))
                throw std::runtime_error("layer " + path + " is not the config's diff_id " + std::to_string(i));
            auto file = files.open_file(path);
            if (!file) throw std::runtime_error("layer " + path + " is missing");
            ::close(file->fd);
            layers.push_back({path, expected, file->size});
        }
        std::vector<ImageName> names;
        for (auto& tag : entry.value("RepoTags", json::array())) {
            auto name = tag.is_string() ? parse_image_name(tag.get<std::string>()) : std::nullopt;
            if (!name || name->repository.empty()) throw std::runtime_error("RepoTags names nothing berth can store");
            names.push_back(*name);
        }
        if (names.empty()) {
            if (options_.repository.empty()) throw std::runtime_error("untagged (no RepoTags): give --repository");
            names.push_back({options_.repository, ""});
        }
        for (auto& name : names) {
            const auto repo = with_prefix(options_.repository_prefix, name.repository);
            auto blobs = layers;
            blobs.push_back({config_path, config_digest, config->size()});
            load_blobs(files, repo, blobs);
            // What the layers turned out to be, for the manifest.
            json manifest = {{"schemaVersion", 2},
                             {"mediaType", oci::media_type::oci_manifest},
                             {"config",
                              {{"mediaType", oci::media_type::oci_config},
                               {"digest", config_digest.str()},
                               {"size", config->size()}}},
                             {"layers", json::array()}};
            for (std::size_t i = 0; i < layers.size(); ++i)
                manifest["layers"].push_back({{"mediaType", "application/vnd.oci.image.layer.v1.tar"},
                                              {"digest", blobs[i].digest->str()},
                                              {"size", layers[i].size}});
            const auto bytes = manifest.dump();
            const auto digest = oci::Digest::of(oci::DigestAlgorithm::sha256, bytes);
            destination_->put_manifest(repo, name.tag.empty() ? digest.str() : name.tag,
                                       std::string(oci::media_type::oci_manifest), bytes);
            ++progress_.manifests;
            report.loaded.push_back(repo + (name.tag.empty() ? "@" + digest.str() : ":" + name.tag));
            layers = {blobs.begin(), blobs.end() - 1};  // digests known now: the next name skips the hashing
        }
    }

    // What a config's file name says its digest is: <hex>.json (docker, skopeo) or blobs/sha256/<hex>
    // (docker 25); a name that says nothing is refused.
    static oci::Digest config_digest_named(const std::string& path) {
        if (auto digest = digest_in_path(path)) return *digest;
        const auto slash = path.rfind('/');
        const auto name = path.substr(slash == std::string::npos ? 0 : slash + 1);
        if (name.size() == 64 + 5 && name.ends_with(".json"))
            if (auto digest = oci::Digest::parse("sha256:" + name.substr(0, 64))) return *digest;
        throw std::runtime_error("its config's name " + path + " does not say its digest");
    }

    // What a layer's file name says its digest is (verified when it is loaded): blobs/sha256/<hex>
    // (docker 25) or <hex>.tar (skopeo's docker-archive); nullopt for docker's <id>/layer.tar.
    static std::optional<oci::Digest> digest_in_path(const std::string& path) {
        constexpr std::string_view prefix = "blobs/sha256/";
        if (path.starts_with(prefix)) return oci::Digest::parse("sha256:" + path.substr(prefix.size()));
        if (path.size() == 64 + 4 && path.ends_with(".tar")) return oci::Digest::parse("sha256:" + path.substr(0, 64));
        return std::nullopt;
    }

    // ---- blobs, several at once

    void load_blobs(const Files& files, const std::string& repo, std::vector<Carried>& blobs) {
        std::mutex mutex;
        std::size_t next = 0;
        std::exception_ptr failure;
        auto work = [&] {
            for (;;) {
                Carried* blob = nullptr;
                {
                    std::lock_guard lock(mutex);
                    if (next == blobs.size() || failure) return;
                    blob = &blobs[next++];
                }
                try {
                    load_blob(files, repo, *blob);
                } catch (...) {
                    std::lock_guard lock(mutex);
                    if (!failure) failure = std::current_exception();
                }
            }
        };
        const auto threads = std::min<std::size_t>(std::max(1u, options_.parallel), blobs.size());
        std::vector<std::thread> workers;
        for (std::size_t i = 1; i < threads; ++i) workers.emplace_back(work);
        work();
        for (auto& worker : workers) worker.join();
        if (failure) std::rethrow_exception(failure);
    }

    void load_blob(const Files& files, const std::string& repo, Carried& blob) {
        if (blob.digest && destination_->has_blob(repo, *blob.digest, blob.size)) {
            ++progress_.blobs_present;
            return;
        }
        auto file = files.open_file(blob.path);
        if (!file)
            throw std::runtime_error("blob " + (blob.digest ? blob.digest->str() : blob.path) +
                                     " is in neither the carrier nor the registry");
        struct Close {
            int fd;
            ~Close() { ::close(fd); }
        } close{file->fd};
        if (file->size != blob.size)
            throw std::runtime_error("blob " + blob.path + " has " + std::to_string(file->size) + " bytes, not " +
                                     std::to_string(blob.size));
        blob.digest = destination_->put_blob(repo, *file, blob.digest, progress_);
        ++progress_.blobs;
    }

    const ImportOptions& options_;
    Progress& progress_;
    std::unique_ptr<Destination> destination_;
};

}  // namespace

ImportReport import_images(const ImportOptions& options, Progress& progress) {
    ImportReport report;
    Importer(options, progress).run(report);
    report.manifests = progress.manifests;
    return report;
}

}  // namespace berth::transfer
