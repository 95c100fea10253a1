#include "berth/registry/quotas.hpp"

#include "berth/oci/error.hpp"
#include "berth/oci/names.hpp"
#include "berth/registry/registry.hpp"

namespace berth::registry {

const QuotaRule* quota_for(const std::vector<QuotaRule>& rules, std::string_view ns) {
    for (auto& rule : rules)
        if (oci::glob_match(rule.namespaces, ns)) return &rule;
    return nullptr;
}

std::string QuotaExceeded::message() const {
    const char* what = bytes ? " bytes of blobs" : " repositories";
    return "quota exceeded: namespace " + ns + " may hold " + std::to_string(limit) + what + " and holds " +
           std::to_string(used) + "; this push would make it " + std::to_string(would_be);
}

std::optional<QuotaExceeded> exceeded_quota(const std::vector<QuotaRule>& rules, const storage::MetaStore& meta,
                                            const storage::MetaStore::Batch& batch) {
    if (rules.empty()) return std::nullopt;
    for (auto& [ns, before, after] : meta.usage_change(batch)) {
        const auto* rule = quota_for(rules, ns);
        if (!rule) continue;
        if (rule->max_bytes && after.bytes > before.bytes && after.bytes > rule->max_bytes)
            return QuotaExceeded{ns, true, rule->max_bytes, before.bytes, after.bytes};
        if (rule->max_repositories && after.repositories > before.repositories &&
            after.repositories > rule->max_repositories)
            return QuotaExceeded{ns, false, rule->max_repositories, before.repositories, after.repositories};
    }
    return std::nullopt;
}

bool Registry::has_quota(const std::string& repo) const {
    return quota_for(options_.quotas, oci::namespace_of(repo)) != nullptr;
}

void Registry::enforce_quotas(const storage::MetaStore::Batch& batch) {
    auto over = exceeded_quota(options_.quotas, meta_, batch);
    if (!over) return;
    ++(over->bytes ? denied_bytes_ : denied_repositories_);
    throw oci::Error(oci::ErrorCode::denied, over->message(), over->ns);
}

// Only where peers will be asked to promise a tag: elsewhere the check under the lock refuses as
// early as it matters. The draft holds the manifest and its tags, not the links the push renews.
void Registry::precheck_quotas(const Admission& what, const std::string& bytes) {
    const auto* policy = policy_for(options_.policies, what.repo);
    if (!policy || !policy->keeps_tags() || !has_quota(what.repo) || (!peers_ && !options_.detached)) return;
    storage::MetaStore::Batch draft;
    const auto draft_stamp = stamp();
    draft.record_manifest(what.repo, what.digest, what.parsed, bytes, draft_stamp);
    for (auto& tag : what.tags) draft.record_tag(what.repo, tag, what.digest.str(), draft_stamp);
    enforce_quotas(draft);
}

}  // namespace berth::registry
