#pragma once
// Quotas per namespace (a repository name up to its first '/'): what a push
// may add to the usage the metadata index keeps (MetaStore::usage). Rules
// come from Options::quotas; docs/quotas.md describes them.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "berth/registry/options.hpp"
#include "berth/storage/meta_store.hpp"

namespace berth::registry {

// The rule for a namespace: the first whose glob matches it; null when none does.
const QuotaRule* quota_for(const std::vector<QuotaRule>& rules, std::string_view ns);

struct QuotaExceeded {
    std::string ns;
    bool bytes = false;  // else repositories
    std::uint64_t limit = 0, used = 0, would_be = 0;
    std::string message() const;
};

// The first namespace that committing batch now would take past a limit of
// its rule. A batch that adds nothing to a quantity passes even when the
// namespace is over it already (a lowered limit stops growth, not a push of
// what is stored). The caller holds meta.lock_writes() until it commits.
std::optional<QuotaExceeded> exceeded_quota(const std::vector<QuotaRule>& rules, const storage::MetaStore& meta,
                                            const storage::MetaStore::Batch& batch);

// A namespace's usage and the rule that applies to it, if any.
struct NamespaceReport {
    std::string ns;
    storage::NamespaceUsage usage;
    const QuotaRule* rule = nullptr;
};

}  // namespace berth::registry
