// What the registry holds, read from this replica's index (contents.hpp).
#include "berth/registry/contents.hpp"

#include "berth/oci/error.hpp"
#include "berth/oci/json.hpp"
#include "berth/oci/media_types.hpp"
#include "berth/oci/names.hpp"
#include "berth/registry/policies.hpp"
#include "berth/registry/registry.hpp"
#include "berth/storage/blob_store.hpp"
#include "berth/storage/hybrid_clock.hpp"
#include "berth/storage/meta_store.hpp"
#include "berth/storage/pull_times.hpp"

namespace berth::registry {

using oci::Error;
using oci::ErrorCode;

namespace {

std::optional<std::uint64_t> time_of(std::optional<std::uint64_t> ms) { return ms && *ms ? ms : std::nullopt; }

// Signature artifact types as referrers name them: cosign's, Sigstore bundles, Notation's.
bool signature_type(const std::string& type) {
    return type.find("signature") != std::string::npos || type.starts_with("application/vnd.dev.sigstore.bundle") ||
           type == "application/vnd.dev.cosign.artifact.sig.v1+json";
}

}  // namespace

void Contents::require_repository(const std::string& repo) const {
    if (!oci::valid_repository_name(repo)) throw Error(ErrorCode::name_invalid, "invalid repository name", repo);
    if (!parts_.meta.has_repository(repo)) throw Error(ErrorCode::name_unknown, "repository unknown", repo);
}

std::vector<std::string> Contents::repository_names(const std::string& after, std::size_t limit) const {
    return parts_.meta.repositories(after, limit);
}

RepositoryRead Contents::repository(const std::string& repo) const {
    const auto held = parts_.meta.repository_usage(repo);
    RepositoryRead facts{repo, held.tags, held.manifests, held.bytes, {}, {}};
    facts.last_push_ms = time_of(storage::HybridClock::physical_ms(held.last_push));
    if (parts_.pulls) facts.last_pull_ms = time_of(parts_.pulls->last(repo, storage::PullTimes::whole_repository));
    return facts;
}

bool Contents::mirrored(const std::string& repo) const { return parts_.upstreams && parts_.upstreams->mirrors(repo); }

bool Contents::immutable_tags(const std::string& repo) const {
    const auto* policy = policy_for(parts_.options.policies, repo);
    return policy && policy->keeps_tags();
}

std::vector<MirrorStatus> Contents::mirrors() const {
    return parts_.upstreams ? parts_.upstreams->mirror_status() : std::vector<MirrorStatus>{};
}

std::vector<std::string> Contents::tag_names(const std::string& repo, const std::string& after,
                                             std::size_t limit) const {
    return parts_.meta.tags(repo, after, limit);
}

std::optional<TagRead> Contents::tag(const std::string& repo, const std::string& name) const {
    auto record = parts_.meta.tag(repo, name);
    if (!record || record->deleted()) return std::nullopt;
    TagRead facts{name, record->digest, time_of(storage::HybridClock::physical_ms(record->stamp.clock)), {}};
    if (parts_.pulls)
        facts.last_pull_ms = time_of(
            std::max(parts_.pulls->last(repo, name).value_or(0), parts_.pulls->last(repo, record->digest).value_or(0)));
    return facts;
}

std::string Contents::resolve(const std::string& repo, const std::string& reference) const {
    if (oci::Digest::parse(reference)) return reference;
    if (!oci::valid_tag(reference)) throw Error(ErrorCode::manifest_invalid, "not a tag or a digest", reference);
    auto tag = parts_.meta.tag(repo, reference);
    if (!tag || tag->deleted()) throw Error(ErrorCode::manifest_unknown, "manifest unknown", reference);
    return tag->digest;
}

std::optional<StoredManifest> Contents::manifest(const std::string& repo, const std::string& digest) const {
    auto record = parts_.meta.manifest(repo, digest);
    if (!record || record->deleted) return std::nullopt;
    return StoredManifest{digest, std::move(record->media_type), std::move(record->bytes)};
}

std::vector<std::string> Contents::tags_of(const std::string& repo, const std::string& digest) const {
    return parts_.meta.tags_of(repo, digest);
}

std::vector<std::string> Contents::referrers(const std::string& repo, const std::string& digest) const {
    return parts_.meta.referrers(repo, digest);
}

std::optional<std::string> Contents::image_config(const std::string& repo, const oci::Descriptor& config,
                                                  std::size_t max_bytes) const {
    if (!oci::media_type::image_config(config.media_type) || config.size <= 0 ||
        static_cast<std::uint64_t>(config.size) > max_bytes)
        return std::nullopt;
    if (!parts_.meta.has_link(repo, config.digest.str())) return std::nullopt;
    return parts_.blobs.read(config.digest, max_bytes);
}

SignatureRead Contents::signature(const std::string& repo, const oci::Digest& digest) const {
    const auto* policy = policy_for(parts_.options.policies, repo);
    if (policy && policy->judges_reads() && parts_.signatures) {
        auto reason = parts_.signatures->unsigned_reason(policy->name, repo, digest);
        if (reason.empty()) return {"verified", {}};
        if (reason == "unsigned") return {"unsigned", {}};
        return {"invalid", reason};
    }
    if (auto tag = parts_.meta.tag(repo, signature_tag(digest)); tag && !tag->deleted()) return {"signed", {}};
    for (auto& descriptor : parts_.meta.referrers(repo, digest.str())) {
        auto parsed = oci::parse_json(descriptor);
        auto type = parsed.is_object() ? parsed.value("artifactType", nlohmann::json()) : nlohmann::json();
        if (type.is_string() && signature_type(type.get<std::string>())) return {"signed", {}};
    }
    return {"unsigned", {}};
}

bool Contents::attachment(const oci::Digest& digest, const oci::ParsedManifest& parsed) const {
    return parts_.registry.attachment(digest, parsed);
}

std::optional<BaseRead> Contents::base(const std::string& repo, const oci::Digest& digest,
                                       const std::vector<std::string>& layers, const MayPull& may_pull) const {
    constexpr std::size_t max_length = 128;  // bases deeper than this are not looked for
    std::optional<BaseRead> found;
    for (auto& [length, ref] : parts_.meta.bases_of(layers, max_length, 16)) {
        if (found && length < found->layers) break;
        if ((ref.repo == repo && ref.digest == digest.str()) || (may_pull && !may_pull(ref.repo))) continue;
        BaseRead candidate{ref.repo, ref.digest, parts_.meta.tags_of(ref.repo, ref.digest), length};
        if (!candidate.tags.empty()) return candidate;
        if (!found) found = std::move(candidate);
    }
    return found;
}

}  // namespace berth::registry
