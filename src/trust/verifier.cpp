#include "berth/trust/verifier.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "berth/oci/json.hpp"
#include "berth/oci/manifest.hpp"
#include "berth/storage/blob_store.hpp"
#include "berth/storage/meta_store.hpp"
#include "formats.hpp"
#include "keys.hpp"

namespace berth::trust {
namespace {

constexpr std::size_t max_judgements = 100000;
constexpr std::size_t max_layers = 1000;  // as cosign's own readers
// What one judgement may cost, whatever a pusher attached: referrers looked at, signatures checked
// and bytes read. An honest manifest has a handful of signatures.
constexpr std::size_t max_referrers_read = 10000;
constexpr std::size_t max_signatures_attached = 256;
constexpr std::size_t max_checks = 256;
constexpr std::uint64_t max_read_bytes = 16 << 20;

// Referrers that may hold a signature, by the artifact type the referrers index keeps: cosign's
// signatures and Sigstore bundles. SBOMs, attestations and scan reports are not looked at.
bool may_sign(const nlohmann::json& descriptor) {
    if (!descriptor.is_object() || !descriptor.contains("artifactType") || !descriptor["artifactType"].is_string())
        return false;
    const auto type = descriptor["artifactType"].get<std::string>();
    return type == "application/vnd.dev.cosign.artifact.sig.v1+json" ||
           type.starts_with("application/vnd.dev.sigstore.bundle");
}

}  // namespace

struct Verifier::Impl {
    Impl(const storage::MetaStore& m, const storage::BlobStore& b) : meta(m), blobs(b) {}
    const storage::MetaStore& meta;
    const storage::BlobStore& blobs;
    struct PolicyKeys {
        std::unique_ptr<KeySet> keys;
        bool match_repository = false;
    };
    std::map<std::string, PolicyKeys> keys;  // by policy name

    struct Judgement {
        std::string fingerprint;  // the keys' generation and the signatures found when judged
        std::string reason;
        std::string held;  // the signature manifest that held, checked first when judging again
    };
    std::mutex mutex;
    std::unordered_map<std::string, Judgement> judged;  // repo \0 digest
    std::atomic<std::uint64_t> counted[2][2] = {};      // [signed][reused]

    // The manifests that may hold a signature (the .sig tag's, the signature referrers), oldest
    // first: a signature made when the image was pushed is checked before whatever was attached
    // since, so a pusher's spam, however much and in whatever digest order, cannot push it out of
    // the budget.
    std::vector<std::string> candidates(const std::string& repo, const oci::Digest& digest) const {
        std::vector<std::pair<storage::Stamp, std::string>> found;
        auto add = [&](const std::string& manifest) {
            if (auto record = meta.manifest(repo, manifest); record && !record->deleted)
                found.emplace_back(record->stamp, manifest);
        };
        if (auto tag = meta.tag(repo, registry::signature_tag(digest)); tag && !tag->deleted()) add(tag->digest);
        std::size_t read = 0;
        meta.visit_referrers(repo, digest.str(), [&](std::string_view descriptor) {
            auto doc = oci::parse_json(descriptor);
            if (may_sign(doc) && doc.contains("digest") && doc["digest"].is_string())
                add(doc["digest"].get<std::string>());
            return ++read < max_referrers_read;
        });
        const auto kept = std::min(found.size(), max_signatures_attached);
        std::partial_sort(found.begin(), found.begin() + static_cast<std::ptrdiff_t>(kept), found.end());
        std::vector<std::string> out;
        for (std::size_t i = 0; i < kept; ++i)
            if (std::find(out.begin(), out.end(), found[i].second) == out.end()) out.push_back(found[i].second);
        return out;
    }

    static std::string fingerprint(std::uint64_t generation, const std::vector<std::string>& attached) {
        std::string out = std::to_string(generation);
        for (auto& d : attached) out += "|" + d;
        return out;
    }

    // The first signature that holds makes the manifest signed (held names it); otherwise the last
    // reason heard. The one that held last time is tried first while it is still a candidate (a
    // deleted .sig tag or referrer revokes it at once, as on a replica that never judged it).
    std::string judge(const Keys& keyset, bool match_repository, const std::string& repo, const oci::Digest& digest,
                      const std::vector<std::string>& attached, std::string& held) const {
        const Expectation expected{digest, repo, match_repository};
        std::string reason = "unsigned";
        std::size_t checks = 0;
        std::uint64_t read_bytes = 0;
        // A signature's bytes, within what is left of this judgement's budget.
        auto read = [&](const oci::Digest& blob, std::uint64_t limit) -> std::optional<std::string> {
            auto bytes = blobs.read(blob, std::min(limit, max_read_bytes - read_bytes));
            if (bytes) read_bytes += bytes->size();
            return bytes;
        };
        auto manifest_holds = [&](const std::string& manifest_digest) {
            auto record = meta.manifest(repo, manifest_digest);
            if (!record || record->deleted) return false;
            oci::ParsedManifest parsed;
            try {
                parsed = oci::parse_manifest(record->bytes, record->media_type);
            } catch (const std::exception&) {
                return false;
            }
            for (std::size_t i = 0; i < parsed.layers.size() && i < max_layers; ++i) {
                auto& layer = parsed.layers[i];
                std::string verdict;
                if ((layer.media_type == registry::simple_signing_type || layer.media_type == bundle_v03_type) &&
                    ++checks > max_checks) {
                    reason = "more signatures attached than one judgement checks (" + std::to_string(max_checks) + ")";
                    return false;
                }
                if (read_bytes >= max_read_bytes) {
                    reason = "more signature bytes attached than one judgement reads (" +
                             std::to_string(max_read_bytes >> 20) + " MiB)";
                    return false;
                }
                if (layer.media_type == registry::simple_signing_type) {
                    auto payload = read(layer.digest, max_payload_bytes);
                    verdict = payload ? judge_simple_signing(*payload, layer.annotations_json, keyset, expected)
                                      : "signature payload missing or too large";
                } else if (layer.media_type == bundle_v03_type) {
                    auto bundle = read(layer.digest, max_bundle_bytes);
                    verdict =
                        bundle ? judge_bundle(*bundle, keyset, expected) : "signature bundle missing or too large";
                } else {
                    continue;
                }
                if (verdict.empty()) return true;
                reason = verdict;
            }
            return false;
        };
        std::vector<std::string> order = attached;
        if (auto last = std::find(order.begin(), order.end(), held); last != order.end())
            std::rotate(order.begin(), last, last + 1);
        held.clear();
        for (std::size_t i = 0; i < order.size() && checks <= max_checks; ++i)
            if (manifest_holds(order[i])) {
                held = order[i];
                return "";
            }
        return reason;
    }
};

Verifier::Verifier(const std::vector<SignatureRule>& rules, const storage::MetaStore& meta,
                   const storage::BlobStore& blobs)
    : impl_(std::make_unique<Impl>(meta, blobs)) {
    for (auto& rule : rules)
        impl_->keys.emplace(rule.policy, Impl::PolicyKeys{std::make_unique<KeySet>(rule.keys), rule.match_repository});
}

Verifier::~Verifier() = default;

std::string Verifier::unsigned_reason(const std::string& policy, const std::string& repo, const oci::Digest& digest) {
    auto& i = *impl_;
    auto set = i.keys.find(policy);
    if (set == i.keys.end()) return "no keys for this policy";
    auto snapshot = set->second.keys->current();
    const auto attached = i.candidates(repo, digest);
    auto fingerprint = i.fingerprint(snapshot.generation, attached);
    // By policy too: two policies' keys judge the same manifest apart.
    const auto key = policy + '\0' + repo + '\0' + digest.str();
    std::string held;
    {
        std::lock_guard lock(i.mutex);
        if (auto it = i.judged.find(key); it != i.judged.end()) {
            if (it->second.fingerprint == fingerprint) {
                ++i.counted[it->second.reason.empty()][1];
                return it->second.reason;
            }
            held = it->second.held;
        }
    }
    auto reason = i.judge(snapshot.keys, set->second.match_repository, repo, digest, attached, held);
    ++i.counted[reason.empty()][0];
    std::lock_guard lock(i.mutex);
    if (i.judged.size() >= max_judgements) i.judged.clear();
    i.judged[key] = {std::move(fingerprint), reason, std::move(held)};
    return reason;
}

void Verifier::write_metrics(observe::MetricsWriter& out) const {
    for (int is_signed = 0; is_signed < 2; ++is_signed)
        for (int reused = 0; reused < 2; ++reused)
            out.add(observe::Metric::signature_verifications_total,
                    {{"result", is_signed ? "signed" : "unsigned"}, {"cached", reused ? "true" : "false"}},
                    static_cast<double>(impl_->counted[is_signed][reused]));
}

}  // namespace berth::trust
