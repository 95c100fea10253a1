// Namespace usage as the Registry reports it: the /_berth/v1/usage listing
// and the quota metrics. The numbers are the metadata index's (MetaStore::usage).
#include "policy_memory.hpp"
#include <algorithm>
#include <chrono>

#include "berth/registry/registry.hpp"

namespace berth::registry {

UsagePage Registry::usage(std::optional<std::size_t> n, const std::string& last) const {
    const std::size_t limit = std::min(n.value_or(options_.max_page), options_.max_page);
    UsagePage page;
    if (limit == 0) return page;
    auto found = meta_.usages(last, limit + 1);  // one more tells whether another page follows
    if (found.size() > limit) {
        found.resize(limit);
        page.more = true;
    }
    for (auto& [ns, usage] : found) page.items.push_back({ns, usage, quota_for(options_.quotas, ns)});
    return page;
}

bool Registry::any_repository(const std::string& ns, const std::function<bool(const std::string&)>& test) const {
    if (meta_.has_repository(ns) && test(ns)) return true;
    // The namespace's other repositories are the names under "ns/", together in byte order.
    const auto prefix = ns + "/";
    constexpr std::size_t piece = 256;
    for (std::string after = prefix;;) {
        auto names = meta_.repositories(after, piece);
        for (auto& name : names) {
            if (!name.starts_with(prefix)) return false;
            if (test(name)) return true;
        }
        if (names.size() < piece) return false;
        after = names.back();
    }
}

void Registry::write_metrics(observe::MetricsWriter& out) const {
    using observe::Metric;
    out.add(Metric::uploads_in_progress, static_cast<double>(uploads_in_progress()));
    out.add(Metric::upload_buffer_bytes, static_cast<double>(upload_buffer_bytes()));
    const auto log = change_log();
    const auto now_ms = static_cast<double>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());
    out.add(Metric::changelog_entries, static_cast<double>(log.entries));
    out.add(Metric::changelog_bytes, static_cast<double>(log.bytes));
    out.add(Metric::changelog_oldest_entry_age_seconds,
            log.oldest_ms ? std::max(0.0, (now_ms - static_cast<double>(log.oldest_ms)) / 1000) : 0.0);
    const auto memory = meta_.memory();
    for (auto [part, bytes] : {std::pair{"record_cache", memory.record_cache},
                               {"memtables", memory.memtables},
                               {"block_cache", memory.block_cache},
                               {"table_readers", memory.table_readers}})
        out.add(Metric::index_memory_bytes, {{"part", part}}, static_cast<double>(bytes));
    {
        std::lock_guard lock(policy_memory_->mutex);
        for (auto& [key, count] : policy_memory_->counts)
            out.add(Metric::policy_refusals_total, {{"policy", key.first}, {"reason", key.second}},
                    static_cast<double>(count));
    }
    if (options_.quotas.empty()) return;
    constexpr std::size_t piece = 1000;
    for (std::string after;;) {
        auto found = meta_.usages(after, piece);
        for (auto& [ns, usage] : found) {
            const auto* rule = quota_for(options_.quotas, ns);
            if (!rule) continue;
            out.add(Metric::namespace_used_bytes, {{"namespace", ns}}, static_cast<double>(usage.bytes));
            out.add(Metric::namespace_repositories, {{"namespace", ns}}, static_cast<double>(usage.repositories));
            if (rule->max_bytes)
                out.add(Metric::namespace_max_bytes, {{"namespace", ns}}, static_cast<double>(rule->max_bytes));
            if (rule->max_repositories)
                out.add(Metric::namespace_max_repositories, {{"namespace", ns}},
                        static_cast<double>(rule->max_repositories));
        }
        if (found.size() < piece) break;
        after = found.back().first;
    }
    out.add(Metric::quota_denied_total, {{"quota", "bytes"}}, static_cast<double>(denied_bytes_));
    out.add(Metric::quota_denied_total, {{"quota", "repositories"}}, static_cast<double>(denied_repositories_));
}

}  // namespace berth::registry
