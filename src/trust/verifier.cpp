#include "berth/trust/verifier.hpp"

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
constexpr std::size_t max_referrers = 64;
constexpr std::size_t max_layers = 1000;  // as cosign's own readers
// What one judgement may cost, whatever a pusher attached: signatures checked and bytes read. A
// manifest with more than this attached is refused; an honest one has a handful.
constexpr std::size_t max_checks = 64;
constexpr std::uint64_t max_read_bytes = 4 << 20;

}  // namespace

struct Verifier::Impl {
    Impl(const storage::MetaStore& m, const storage::BlobStore& b) : meta(m), blobs(b) {}
    const storage::MetaStore& meta;
    const storage::BlobStore& blobs;
    std::map<std::string, std::unique_ptr<KeySet>> keys;  // by policy name

    struct Judgement {
        std::string fingerprint;  // the keys' generation and the signatures found when judged
        std::string reason;
    };
    std::mutex mutex;
    std::unordered_map<std::string, Judgement> judged;  // repo \0 digest
    std::atomic<std::uint64_t> counted[2][2] = {};      // [signed][reused]

    // The referrers' manifest digests (descriptors as the referrers index keeps them).
    std::vector<std::string> referrers(const std::string& repo, const oci::Digest& digest) const {
        std::vector<std::string> out;
        for (auto& descriptor : meta.referrers(repo, digest.str())) {
            if (out.size() == max_referrers) break;
            auto doc = oci::parse_json(descriptor);
            if (doc.is_object() && doc.contains("digest") && doc["digest"].is_string())
                out.push_back(doc["digest"].get<std::string>());
        }
        return out;
    }

    std::string fingerprint(std::uint64_t generation, const std::string& repo, const oci::Digest& digest,
                            const std::vector<std::string>& attached) const {
        std::string out = std::to_string(generation) + "|";
        if (auto tag = meta.tag(repo, registry::signature_tag(digest)); tag && !tag->deleted()) out += tag->digest;
        for (auto& d : attached) out += "|" + d;
        return out;
    }

    // The first signature that holds makes the manifest signed; otherwise the last reason heard.
    std::string judge(const Keys& keyset, const registry::Policy& policy, const std::string& repo,
                      const oci::Digest& digest, const std::vector<std::string>& attached) const {
        const Expectation expected{digest, repo, policy.require_signature->match_repository};
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
                    (++checks > max_checks || read_bytes >= max_read_bytes)) {
                    reason = "more signatures attached than one judgement checks (" + std::to_string(max_checks) + ")";
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
        if (auto tag = meta.tag(repo, registry::signature_tag(digest));
            tag && !tag->deleted() && manifest_holds(tag->digest))
            return "";
        for (auto& referrer : attached) {
            if (checks > max_checks) break;
            if (manifest_holds(referrer)) return "";
        }
        return reason;
    }
};

Verifier::Verifier(const std::vector<registry::Policy>& policies, const storage::MetaStore& meta,
                   const storage::BlobStore& blobs)
    : impl_(std::make_unique<Impl>(meta, blobs)) {
    for (auto& policy : policies)
        if (policy.require_signature)
            impl_->keys.emplace(policy.name, std::make_unique<KeySet>(policy.require_signature->keys));
}

Verifier::~Verifier() = default;

std::string Verifier::unsigned_reason(const registry::Policy& policy, const std::string& repo,
                                      const oci::Digest& digest) {
    auto& i = *impl_;
    auto set = i.keys.find(policy.name);
    if (set == i.keys.end() || !policy.require_signature) return "no keys for this policy";
    auto snapshot = set->second->current();
    const auto attached = i.referrers(repo, digest);
    auto fingerprint = i.fingerprint(snapshot.generation, repo, digest, attached);
    const auto key = repo + '\0' + digest.str();
    {
        std::lock_guard lock(i.mutex);
        if (auto it = i.judged.find(key); it != i.judged.end() && it->second.fingerprint == fingerprint) {
            ++i.counted[it->second.reason.empty()][1];
            return it->second.reason;
        }
    }
    auto reason = i.judge(snapshot.keys, policy, repo, digest, attached);
    ++i.counted[reason.empty()][0];
    std::lock_guard lock(i.mutex);
    if (i.judged.size() >= max_judgements) i.judged.clear();
    i.judged[key] = {std::move(fingerprint), reason};
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
