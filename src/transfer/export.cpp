// berth export (transfer.hpp): images with their indexes' children and their referrers, read
// from a store (beside a running berth: the index read-only) or a registry's API, written as an
// OCI image layout into a directory or a tar archive. Tags become full-reference ref.name
// annotations, so berth import puts every image back under its own name.
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

#include "api_client.hpp"
#include "berth/oci/json.hpp"
#include "berth/oci/manifest.hpp"
#include "berth/oci/paths.hpp"
#include "berth/storage/blob_hash.hpp"
#include "berth/storage/blob_store.hpp"
#include "berth/storage/hybrid_clock.hpp"
#include "berth/storage/layout.hpp"
#include "berth/storage/meta_store.hpp"
#include "berth/transfer/transfer.hpp"
#include "layout_writer.hpp"
#include "names.hpp"

namespace berth::transfer {

namespace {

using nlohmann::json;

constexpr int max_depth = 4;

struct Manifest {
    oci::Digest digest;
    std::string media_type, bytes;
};

// Where images are read from.
class Reader {
public:
    virtual ~Reader() = default;
    virtual Manifest manifest(const std::string& repo, const std::string& reference) = 0;
    virtual std::vector<oci::Digest> referrers(const std::string& repo, const oci::Digest& subject) = 0;
    // Streams the blob's bytes to sink; returns its size.
    virtual void blob(const std::string& repo, const oci::Digest& digest,
                      const std::function<void(std::uint64_t size)>& begin,
                      const std::function<void(const char*, std::size_t)>& sink) = 0;
    // When repo linked the blob, ms since the epoch; nullopt when unknown.
    virtual std::optional<std::uint64_t> linked_at(const std::string& repo, const oci::Digest& digest) = 0;
};

class StoreReader : public Reader {
public:
    explicit StoreReader(const std::filesystem::path& root)
        : meta_(storage::layout::meta_dir(root), storage::MetaStore::Mode::read_only),
          blobs_(root, storage::StoreUse::beside) {}

    Manifest manifest(const std::string& repo, const std::string& reference) override {
        auto digest = oci::Digest::parse(reference);
        std::string digest_text = reference;
        if (!digest) {
            auto tag = meta_.tag(repo, reference);
            if (!tag || tag->deleted()) throw std::runtime_error(repo + ":" + reference + " is not in the store");
            digest_text = tag->digest;
        }
        auto record = meta_.manifest(repo, digest_text);
        if (!record || record->deleted) throw std::runtime_error(repo + "@" + digest_text + " is not in the store");
        return {oci::Digest::parse_or_throw(digest_text), record->media_type, record->bytes};
    }
    std::vector<oci::Digest> referrers(const std::string& repo, const oci::Digest& subject) override {
        std::vector<oci::Digest> out;
        for (auto& descriptor : meta_.referrers(repo, subject.str())) {
            auto parsed = oci::parse_json(descriptor);
            if (auto d = parsed.is_object() ? oci::Digest::parse(parsed.value("digest", "")) : std::nullopt)
                out.push_back(*d);
        }
        return out;
    }
    void blob(const std::string& repo, const oci::Digest& digest, const std::function<void(std::uint64_t)>& begin,
              const std::function<void(const char*, std::size_t)>& sink) override {
        auto open = blobs_.open(digest);
        if (!open) throw std::runtime_error("blob " + digest.str() + " of " + repo + " is not in the store");
        begin(open->size());
        storage::read_all(*open, sink);
    }
    std::optional<std::uint64_t> linked_at(const std::string& repo, const oci::Digest& digest) override {
        auto link = meta_.link(repo, digest.str());
        if (!link || link->deleted) return std::nullopt;
        return storage::HybridClock::physical_ms(link->stamp.clock);
    }

private:
    storage::MetaStore meta_;
    storage::FileBlobStore blobs_;
};

class ApiReader : public Reader {
public:
    explicit ApiReader(const Endpoint& endpoint) : api_(endpoint) {}

    Manifest manifest(const std::string& repo, const std::string& reference) override {
        auto answer =
            api_.request("GET", oci::path::manifest(repo, reference), pull_scope(repo), remote::accept_manifests());
        if (answer.status != 200) throw std::runtime_error(describe_answer(repo + ":" + reference, answer));
        auto digest = oci::Digest::of(oci::DigestAlgorithm::sha256, answer.body);
        if (auto asked = oci::Digest::parse(reference); asked && *asked != digest)
            throw std::runtime_error(repo + "@" + reference + " answered other bytes");
        auto type = answer.header("Content-Type");
        return {digest, type.substr(0, type.find(';')), std::move(answer.body)};
    }
    std::vector<oci::Digest> referrers(const std::string& repo, const oci::Digest& subject) override {
        auto answer = api_.request("GET", oci::path::referrers(repo, subject.str()), pull_scope(repo));
        std::vector<oci::Digest> out;
        if (answer.status != 200) return out;  // a registry without the referrers API: none to carry
        auto index = oci::parse_json(answer.body);
        if (!index.is_object() || !index.contains("manifests") || !index["manifests"].is_array()) return out;
        for (auto& descriptor : index["manifests"])
            if (auto d = descriptor.is_object() ? oci::Digest::parse(descriptor.value("digest", "")) : std::nullopt)
                out.push_back(*d);
        return out;
    }
    void blob(const std::string& repo, const oci::Digest& digest, const std::function<void(std::uint64_t)>& begin,
              const std::function<void(const char*, std::size_t)>& sink) override {
        bool begun = false;
        std::uint64_t size = 0;
        const int status = api_.receive(
            oci::path::blob(repo, digest.str()), pull_scope(repo),
            [&](const char* data, std::size_t n) {
                if (!begun) begin(size), begun = true;
                sink(data, n);
            },
            size);
        if (status != 200) throw std::runtime_error("GET blob " + digest.str() + " answered " + std::to_string(status));
        if (!begun) begin(0);
    }
    std::optional<std::uint64_t> linked_at(const std::string&, const oci::Digest&) override { return std::nullopt; }

private:
    ApiClient api_;
};

class Exporter {
public:
    Exporter(const ExportOptions& options, Progress& progress)
        : options_(options), progress_(progress),
          reader_(options.from.url.empty() ? std::unique_ptr<Reader>(new StoreReader(options.from.root))
                                           : std::unique_ptr<Reader>(new ApiReader(options.from))),
          writer_(options.to) {}

    ExportReport run() {
        ExportReport report;
        json index = {{"schemaVersion", 2},
                      {"mediaType", "application/vnd.oci.image.index.v1+json"},
                      {"manifests", json::array()}};
        for (auto& reference : options_.references) {
            auto [repo, ref] = split(reference);
            auto top = reader_->manifest(repo, ref);
            json entry = {{"mediaType", top.media_type}, {"digest", top.digest.str()}, {"size", top.bytes.size()}};
            // A full reference, as skopeo writes oci:DIR:REPO:TAG: the import needs no --repository.
            entry["annotations"]["org.opencontainers.image.ref.name"] =
                oci::Digest::parse(ref) ? repo + "@" + ref : repo + ":" + ref;
            write_tree(repo, top, index, report, 0);
            index["manifests"].push_back(entry);
            report.written.push_back(reference);
        }
        writer_.finish(index);
        report.manifests = progress_.manifests;
        report.blobs = progress_.blobs;
        report.bytes = progress_.bytes;
        return report;
    }

private:
    static std::pair<std::string, std::string> split(const std::string& reference) {
        if (auto at = reference.find('@'); at != std::string::npos)
            return {reference.substr(0, at), reference.substr(at + 1)};
        const auto colon = reference.rfind(':'), slash = reference.rfind('/');
        const bool tagged = colon != std::string::npos && (slash == std::string::npos || colon > slash);
        auto name = parse_image_name(tagged ? reference : reference + ":latest");
        if (!name || name->repository.empty()) throw std::runtime_error(reference + " is not REPOSITORY[:TAG|@DIGEST]");
        return {name->repository, name->tag};
    }

    void write_tree(const std::string& repo, const Manifest& manifest, json& index, ExportReport& report, int depth) {
        if (depth > max_depth) throw std::runtime_error("indexes nested deeper than " + std::to_string(max_depth));
        auto parsed = oci::parse_manifest(manifest.bytes, manifest.media_type);
        for (auto& child : parsed.manifests)
            write_tree(repo, reader_->manifest(repo, child.digest.str()), index, report, depth + 1);
        for (auto& blob : parsed.local_blobs()) {
            if (writer_.has(blob.digest)) continue;
            if (options_.since) {
                auto linked = reader_->linked_at(repo, blob.digest);
                const auto since_ms = static_cast<std::uint64_t>(
                    std::chrono::duration_cast<std::chrono::milliseconds>(options_.since->time_since_epoch()).count());
                if (linked && *linked < since_ms) {
                    ++report.blobs_left_out;
                    continue;
                }
            }
            writer_.add(
                blob.digest, [&](auto& begin, auto& sink) { reader_->blob(repo, blob.digest, begin, sink); },
                progress_);
            ++progress_.blobs;
        }
        writer_.add_bytes(manifest.digest, manifest.bytes, progress_);
        ++progress_.manifests;
        // Signatures, SBOMs and attestations travel with what they are about, as unnamed entries
        // the import puts into their subject's repository.
        if (depth == 0 || parsed.manifests.empty())
            for (auto& referrer : reader_->referrers(repo, manifest.digest)) {
                if (seen_referrers_.count(referrer.str())) continue;
                seen_referrers_.insert(referrer.str());
                auto attached = reader_->manifest(repo, referrer.str());
                write_tree(repo, attached, index, report, depth + 1);
                index["manifests"].push_back({{"mediaType", attached.media_type},
                                              {"digest", attached.digest.str()},
                                              {"size", attached.bytes.size()}});
            }
    }

    const ExportOptions& options_;
    Progress& progress_;
    std::unique_ptr<Reader> reader_;
    LayoutWriter writer_;
    std::set<std::string> seen_referrers_;
};

}  // namespace

ExportReport export_images(const ExportOptions& options, Progress& progress) {
    return Exporter(options, progress).run();
}

}  // namespace berth::transfer
