// Approved base images (a policy's base_images, docs/policies.md): an image pushed to a matching
// repository begins with the complete layer list of a manifest that a matching REPOSITORY:TAG
// names or ever named, for the same platform. Found through the lineage index: the pushed
// layer list's prefixes, longest first, each one seek.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "berth/oci/json.hpp"
#include "berth/oci/error.hpp"
#include "berth/oci/manifest.hpp"
#include "berth/oci/media_types.hpp"
#include "berth/oci/names.hpp"
#include "berth/storage/blob_store.hpp"
#include "berth/storage/meta_store.hpp"
#include "policy_enforcement.hpp"

namespace berth::registry {

namespace {

constexpr std::size_t max_candidates = 64;  // manifests with one layer list, looked at per prefix
constexpr std::size_t max_approved = 1000;  // base versions compared to say where a refused push diverges
constexpr std::uint64_t max_config_bytes = 4 << 20;

// base_images globs as (repository glob, tag glob); the config checked each has both.
std::vector<std::pair<std::string, std::string>> split_globs(const std::vector<std::string>& globs) {
    std::vector<std::pair<std::string, std::string>> out;
    for (auto& glob : globs) {
        auto colon = glob.rfind(':');
        out.emplace_back(glob.substr(0, colon), glob.substr(colon + 1));
    }
    return out;
}

bool names_approved(const std::vector<std::pair<std::string, std::string>>& globs, const std::string& repo,
                    const std::vector<std::string>& tags) {
    for (auto& [repo_glob, tag_glob] : globs)
        if (oci::glob_match(repo_glob, repo))
            for (auto& tag : tags)
                if (oci::glob_match(tag_glob, tag)) return true;
    return false;
}

std::size_t common_prefix(const std::vector<std::string>& a, const std::vector<std::string>& b) {
    std::size_t i = 0;
    while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
    return i;
}

// "os/architecture[/variant]" from an image's config blob, when it is stored here.
std::optional<std::string> platform_of(const storage::BlobStore& blobs, const oci::ParsedManifest& image) {
    if (!image.config) return std::nullopt;
    // A mirrored base whose config was never fetched: the layers decide.
    auto bytes = blobs.read(image.config->digest, max_config_bytes);
    if (!bytes) return std::nullopt;
    auto config = oci::parse_json(*bytes);
    if (!config.is_object()) return std::nullopt;
    auto field = [&](const char* key) {
        auto it = config.find(key);
        return it != config.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    auto platform = field("os") + "/" + field("architecture");
    if (auto variant = field("variant"); !variant.empty()) platform += "/" + variant;
    return platform;
}

// Why no approved base fits these layers: where they diverge from the closest.
std::string base_divergence(const PolicyEnforcement& with, const std::vector<std::string>& base_images,
                            const std::vector<std::string>& layers, const std::optional<std::string>& platform) {
    const auto& meta = with.meta();
    std::set<storage::MetaStore::ManifestRef> versions;
    for (auto& [repo_glob, tag_glob] : split_globs(base_images)) {
        // The tag history of the repositories the glob's literal beginning names.
        const auto literal = repo_glob.substr(0, repo_glob.find_first_of("*?["));
        meta.visit_tag_history(literal, [&](const std::string& repo, const std::string& tag, const std::string& d) {
            if (oci::glob_match(repo_glob, repo) && oci::glob_match(tag_glob, tag)) versions.insert({repo, d});
            return versions.size() < max_approved;
        });
    }
    std::string all;
    for (auto& glob : base_images) all += (all.empty() ? "" : ", ") + glob;
    if (versions.empty()) return "no approved base (" + all + ") is stored here";
    // The approved image sharing the most leading layers.
    std::size_t best = 0;
    std::optional<std::pair<storage::MetaStore::ManifestRef, oci::ParsedManifest>> closest;
    auto consider = [&](const storage::MetaStore::ManifestRef& ref, oci::ParsedManifest image) {
        if (image.kind != oci::ManifestKind::image) return;
        auto shared = common_prefix(layers, image.layer_digests());
        if (!closest || shared > best) best = shared, closest.emplace(ref, std::move(image));
    };
    for (auto& ref : versions) {
        auto record = meta.manifest(ref.repo, ref.digest);
        if (!record || record->deleted) continue;
        auto parsed = oci::parse_manifest(record->bytes, record->media_type);
        for (auto& child : parsed.manifests)
            if (auto c = meta.manifest(ref.repo, child.digest.str()); c && !c->deleted)
                consider({ref.repo, child.digest.str()}, oci::parse_manifest(c->bytes, c->media_type));
        consider(ref, std::move(parsed));
    }
    if (!closest) return "no approved base (" + all + ") is stored here";
    const auto& [ref, image] = *closest;
    const auto name = ref.repo + "@" + ref.digest;
    if (best == image.layers.size())
        return "it is built on " + name + ", which is for " +
               platform_of(with.blobs(), image).value_or("another platform") + ", not " +
               platform.value_or("this platform");
    if (best == layers.size())
        return "its " + std::to_string(layers.size()) + " layers are only the beginning of " + name + " (" +
               std::to_string(image.layers.size()) + " layers)";
    return "layer " + std::to_string(best + 1) + " (" + layers[best] + ") diverges from every approved base (" + all +
           "); the closest, " + name + ", shares " + std::to_string(best) + " of its " +
           std::to_string(image.layers.size()) + " layers";
}

class BaseImages final : public PolicyRule {
public:
    explicit BaseImages(std::vector<std::string> globs) : globs_(std::move(globs)) {}

    void before_write(const Policy& policy, const Entry& entry, PolicyEnforcement& with) const override {
        require_approved_base(policy, entry.repo, entry.digest, entry.parsed, with);
    }

private:
    void require_approved_base(const Policy& policy, const std::string& repo, const oci::Digest& digest,
                               const oci::ParsedManifest& parsed, PolicyEnforcement& with) const;
    std::vector<std::string> globs_;  // REPOSITORY:TAG globs
};

// An image pushed under the policy begins with an approved base; an index, each of its children.
void BaseImages::require_approved_base(const Policy& policy, const std::string& repo, const oci::Digest& digest,
                                       const oci::ParsedManifest& parsed, PolicyEnforcement& with) const {
    const auto& meta = with.meta();
    if (parsed.kind == oci::ManifestKind::index) {
        // Every child, also one pushed before the policy named this repository.
        for (auto& child : parsed.manifests) {
            auto record = meta.manifest(repo, child.digest.str());
            if (!record || record->deleted) continue;  // a sparse repository's child: nothing here to judge
            require_approved_base(policy, repo, child.digest, oci::parse_manifest(record->bytes, record->media_type),
                                  with);
        }
        return;
    }
    // Signatures, SBOMs and other artifacts are not built on anything; whatever a runtime could
    // run is, whatever its tags or subject say.
    if (with.attachment(digest, parsed)) return;
    const auto globs = split_globs(globs_);
    const auto layers = parsed.layer_digests();
    const auto platform = platform_of(with.blobs(), parsed);
    auto same_platform = [&](const oci::ParsedManifest& base) {
        auto other = platform_of(with.blobs(), base);
        return !platform || !other || *platform == *other;
    };
    auto approved = [&](const storage::MetaStore::ManifestRef& ref) {
        if (names_approved(globs, ref.repo, meta.tags_ever(ref.repo, ref.digest))) return true;
        for (auto& index : meta.indexes_listing(ref.repo, ref.digest))
            if (names_approved(globs, ref.repo, meta.tags_ever(ref.repo, index))) return true;
        return false;
    };
    for (std::size_t n = layers.size(); n > 0; --n) {
        const std::vector<std::string> prefix(layers.begin(), layers.begin() + static_cast<std::ptrdiff_t>(n));
        for (auto& ref : meta.with_layers(prefix, max_candidates)) {
            auto record = meta.manifest(ref.repo, ref.digest);
            if (!record || record->deleted) continue;
            auto base = oci::parse_manifest(record->bytes, record->media_type);
            if (base.layer_digests() == prefix && same_platform(base) && approved(ref)) return;
        }
    }
    with.refuse(policy, "unapproved_base", base_divergence(with, globs_, layers, platform), repo, digest.str());
}

}  // namespace

std::shared_ptr<const PolicyRule> base_images_rule(std::vector<std::string> globs) {
    return std::make_shared<BaseImages>(std::move(globs));
}

}  // namespace berth::registry
