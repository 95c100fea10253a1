// require_signature (docs/policies.md): a manifest is served only when a signature by one of the
// policy's keys exists for it in its repository (trust/verifier.hpp judges). Judged at every read,
// so it holds however the manifest arrived. Signatures, attestations and SBOMs stay readable, so
// signing and verifying clients work: what attachments.cpp says no runtime can run.
#include <algorithm>

#include "berth/oci/error.hpp"
#include "berth/oci/media_types.hpp"
#include "berth/storage/meta_store.hpp"
#include "policy_enforcement.hpp"

namespace berth::registry {
namespace {

bool is_index(const std::string& media_type) {
    return media_type == oci::media_type::oci_index || media_type == oci::media_type::docker_manifest_list;
}

// The children of a signed index are served with it: an index's own digest is what `cosign sign`
// and `skopeo copy --all --sign-*` sign.
bool signed_parent(const Policy& policy, const std::string& repo, const oci::Digest& child, PolicyEnforcement& with) {
    const auto key = repo + '\0' + child.str();
    // The index found last time, still signed (a cached judgement): no scan of the repository.
    if (auto known = with.remembered_parent(key))
        if (with.unsigned_reason(policy, repo, *oci::Digest::parse(*known)).empty()) return true;
    const auto wanted = child.str();
    std::optional<std::string> found;
    with.meta().visit_manifests(repo, [&](const std::string& digest, const storage::ManifestRecord& record) {
        if (found || record.deleted || !is_index(record.media_type)) return;
        try {
            auto parsed = oci::parse_manifest(record.bytes, record.media_type);
            const bool lists = std::any_of(parsed.manifests.begin(), parsed.manifests.end(),
                                           [&](auto& d) { return d.digest.str() == wanted; });
            if (lists && with.unsigned_reason(policy, repo, *oci::Digest::parse(digest)).empty()) found = digest;
        } catch (const oci::Error& error) {
            if (error.code() == oci::ErrorCode::unavailable) throw;  // the store is away: not a verdict
        }
    });
    if (found) with.remember_parent(key, *found);
    return found.has_value();
}

class Signatures final : public PolicyRule {
public:
    void read(const Policy& policy, const ManifestRead& read, PolicyEnforcement& with) const override {
        if (attachment(read, with)) return;
        with.fetch_mirrored_signature(read.repo, read.digest, read.asker);
        auto reason = with.unsigned_reason(policy, read.repo, read.digest);
        if (reason.empty()) return;
        if (!is_index(read.media_type) && signed_parent(policy, read.repo, read.digest, with)) return;
        with.refuse(policy, reason == "unsigned" ? "unsigned" : "bad_signature",
                    reason + " (" + read.digest.str() + ")", read.repo, read.reference);
    }

    bool judges_reads() const override { return true; }

private:
    static bool attachment(const ManifestRead& read, PolicyEnforcement& with) {
        try {
            return with.attachment(read.digest, oci::parse_manifest(read.bytes, read.media_type));
        } catch (const oci::Error& error) {
            if (error.code() == oci::ErrorCode::unavailable) throw;  // the store is away: not a verdict
            return false;  // stored manifests parsed when stored: judge what no longer does
        }
    }
};

}  // namespace

std::shared_ptr<const PolicyRule> signature_rule() { return std::make_shared<Signatures>(); }

}  // namespace berth::registry
