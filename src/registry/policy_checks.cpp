// What the policies refuse (registry/policies.hpp, docs/policies.md): reads of
// unsigned manifests, moved or deleted immutable tags. Each refusal is 403
// DENIED naming the policy and the reason, changes nothing, and is counted and
// audited.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "berth/oci/error.hpp"
#include "berth/oci/manifest.hpp"
#include <nlohmann/json.hpp>

#include "berth/observe/log.hpp"
#include "berth/registry/registry.hpp"
#include "berth/storage/filling_blob.hpp"
#include "berth/storage/meta_store.hpp"
#include "policy_memory.hpp"

namespace berth::registry {

using oci::Error;
using oci::ErrorCode;

namespace {

bool is_index(const std::string& media_type) {
    return media_type == "application/vnd.oci.image.index.v1+json" ||
           media_type == "application/vnd.docker.distribution.manifest.list.v2+json";
}

}  // namespace

void Registry::refuse(const Policy& policy, const char* reason, const std::string& message, const std::string& repo,
                      const std::string& reference) {
    policy_memory_->count(policy.name, reason);
    observe::log("info", "audit",
                 {{"action", "refused"},
                  {"policy", policy.name},
                  {"reason", reason},
                  {"repository", repo},
                  {"reference", reference},
                  {"message", message}});
    throw Error(ErrorCode::denied, policy.name + ": " + message, reference);
}

bool Registry::signatures_required(const std::string& repo) const {
    const auto* policy = policy_for(options_.policies, repo);
    return policy && policy->require_signature;
}

// Signatures, attestations and SBOMs stay readable, so signing and verifying clients work: what
// attachment() says no runtime can run.
void Registry::require_signed(const std::string& repo, const std::string& reference, const Manifest& manifest,
                              Asker asker) {
    const auto* policy = policy_for(options_.policies, repo);
    if (!policy || !policy->require_signature || attachment(manifest)) return;
    fetch_mirrored_signature(repo, manifest.digest, asker);
    auto reason = signatures_ ? signatures_->unsigned_reason(*policy, repo, manifest.digest)
                              : std::string("no signature verifier");
    if (reason.empty()) return;
    // The children of a signed index are served with it: an index's own digest is what
    // `cosign sign` and `skopeo copy --all --sign-*` sign.
    if (!is_index(manifest.media_type) && signed_parent(*policy, repo, manifest.digest)) return;
    refuse(*policy, reason == "unsigned" ? "unsigned" : "bad_signature", reason + " (" + manifest.digest.str() + ")",
           repo, reference);
}

void Registry::fetch_mirrored_signature(const std::string& repo, const oci::Digest& digest, Asker asker) {
    if (!upstreams_ || !upstreams_->mirrors(repo)) return;
    constexpr std::size_t max_signature_layers = 16;
    constexpr auto wait = std::chrono::seconds(30);
    try {
        auto signature = get_mirrored_manifest(repo, signature_tag(digest), asker);
        auto parsed = oci::parse_manifest(signature.bytes, signature.media_type);
        for (std::size_t i = 0; i < parsed.layers.size() && i < max_signature_layers; ++i) {
            if (parsed.layers[i].media_type != simple_signing_type) continue;
            auto read = open_mirrored_blob(repo, parsed.layers[i].digest, asker);
            if (!read || !read->blob.filling()) continue;
            // The verifier reads the stored file: wait for the fetch to be verified and kept
            // (FillingBlob holds the last byte back until then).
            auto filling = read->blob.filling();
            struct Wake {
                std::mutex mutex;
                std::condition_variable ready;
                bool woken = false;
            };
            const auto deadline = std::chrono::steady_clock::now() + wait;
            while (filling->readable() < filling->size() && !filling->failed() &&
                   std::chrono::steady_clock::now() < deadline) {
                // Shared: the writer may call back after this wait has given up.
                auto wake = std::make_shared<Wake>();
                filling->when_readable(filling->readable(), [wake] {
                    std::lock_guard lock(wake->mutex);
                    wake->woken = true;
                    wake->ready.notify_all();
                });
                std::unique_lock lock(wake->mutex);
                wake->ready.wait_until(lock, deadline, [&] { return wake->woken; });
            }
        }
    } catch (const std::exception&) {
        // No signature upstream, or none to be had now: judged on what is stored here.
    }
}

bool Registry::signed_parent(const Policy& policy, const std::string& repo, const oci::Digest& child) {
    const auto key = repo + '\0' + child.str();
    // The index found last time, still signed (a cached judgement): no scan of the repository.
    if (auto known = policy_memory_->parent_of(key))
        if (signatures_->unsigned_reason(policy, repo, *oci::Digest::parse(*known)).empty()) return true;
    const auto wanted = child.str();
    std::optional<std::string> found;
    meta_.visit_manifests(repo, [&](const std::string& digest, const storage::ManifestRecord& record) {
        if (found || record.deleted || !is_index(record.media_type)) return;
        try {
            auto parsed = oci::parse_manifest(record.bytes, record.media_type);
            const bool lists = std::any_of(parsed.manifests.begin(), parsed.manifests.end(),
                                           [&](auto& d) { return d.digest.str() == wanted; });
            if (lists && signatures_->unsigned_reason(policy, repo, *oci::Digest::parse(digest)).empty())
                found = digest;
        } catch (const Error&) {}
    });
    if (found) policy_memory_->remember_parent(key, *found);
    return found.has_value();
}

void Registry::require_tags_unmoved(const std::string& repo, const std::string& digest,
                                    const std::vector<std::string>& tags) {
    const auto* policy = policy_for(options_.policies, repo);
    if (!policy || !policy->immutable_tags) return;
    for (auto& tag : tags) {
        auto record = meta_.tag(repo, tag);
        if (record && !record->deleted() && record->digest != digest)
            refuse(*policy, "immutable_tag", "tag " + tag + " is immutable and names " + record->digest, repo, tag);
    }
}

void Registry::claim_new_tags(const std::string& repo, const std::string& digest,
                              const std::vector<std::string>& tags) {
    const auto* policy = policy_for(options_.policies, repo);
    if (!policy || !policy->immutable_tags || (!peers_ && !options_.detached)) return;
    using Outcome = TagClaim::Outcome;
    for (auto& tag : tags) {
        // A tag held here already is judged under the write lock (require_tags_unmoved).
        if (auto record = meta_.tag(repo, tag); record && !record->deleted()) continue;
        auto claim = peers_
                         ? peers_->claim_tag(repo, tag, digest)
                         : TagClaim{TagClaim::Outcome::undecided, {}, "the replica is stopped: import through its API"};
        observe::log("info", "audit",
                     {{"action", "claim"},
                      {"policy", policy->name},
                      {"repository", repo},
                      {"reference", tag + "@" + digest},
                      {"outcome", claim.outcome == Outcome::granted ? "granted"
                                  : claim.outcome == Outcome::taken ? "taken"
                                                                    : "undecided"},
                      {"detail", claim.detail}});
        if (claim.outcome == Outcome::granted) continue;
        if (claim.outcome == Outcome::taken)
            refuse(*policy, "immutable_tag", "tag " + tag + " is immutable and promised to " + claim.holder, repo, tag);
        policy_memory_->count(policy->name, "undecided");
        throw Error(
            ErrorCode::unavailable,
            "tag " + tag + " is immutable and too few replicas could be asked to decide it: nothing was written",
            claim.detail);
    }
}

void Registry::require_deletable(const std::string& repo, const std::string& tag, const std::string& digest) {
    const auto* policy = policy_for(options_.policies, repo);
    if (!policy || !policy->immutable_tags) return;
    if (!tag.empty()) refuse(*policy, "immutable_tag", "tag " + tag + " is immutable", repo, tag);
    auto tags = meta_.tags_of(repo, digest);
    if (!tags.empty())
        refuse(*policy, "immutable_tag", "the immutable tag " + tags.front() + " names this manifest", repo, digest);
}

}  // namespace berth::registry
