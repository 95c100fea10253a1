// Namespace usage as the Registry reports it: the /_berth/v1/usage listing
// and the quota metrics. The numbers are the metadata index's (MetaStore::usage).
#include <algorithm>

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

std::string Registry::quota_metrics_text() const {
    if (options_.quotas.empty()) return {};
    std::string used_bytes, repositories, max_bytes, max_repositories;
    auto sample = [](std::string& out, const char* name, const std::string& ns, std::uint64_t value) {
        out += std::string(name) + "{namespace=\"" + ns + "\"} " + std::to_string(value) + "\n";
    };
    constexpr std::size_t piece = 1000;
    for (std::string after;;) {
        auto found = meta_.usages(after, piece);
        for (auto& [ns, usage] : found) {
            const auto* rule = quota_for(options_.quotas, ns);
            if (!rule) continue;
            sample(used_bytes, "berth_namespace_used_bytes", ns, usage.bytes);
            sample(repositories, "berth_namespace_repositories", ns, usage.repositories);
            if (rule->max_bytes) sample(max_bytes, "berth_namespace_max_bytes", ns, rule->max_bytes);
            if (rule->max_repositories)
                sample(max_repositories, "berth_namespace_max_repositories", ns, rule->max_repositories);
        }
        if (found.size() < piece) break;
        after = found.back().first;
    }
    auto family = [](const char* name, const char* type, const char* help, const std::string& samples) {
        return std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + samples;
    };
    return family("berth_namespace_used_bytes", "gauge",
                  "Bytes of the distinct blobs linked into a namespace's repositories (namespaces a quota rule "
                  "matches).",
                  used_bytes) +
           family("berth_namespace_repositories", "gauge", "Repositories in a namespace a quota rule matches.",
                  repositories) +
           family("berth_namespace_max_bytes", "gauge", "A namespace's quota of bytes.", max_bytes) +
           family("berth_namespace_max_repositories", "gauge", "A namespace's quota of repositories.",
                  max_repositories) +
           family("berth_quota_denied_total", "counter", "Pushes refused for a quota, by quota.",
                  "berth_quota_denied_total{quota=\"bytes\"} " + std::to_string(denied_bytes_) + "\n" +
                      "berth_quota_denied_total{quota=\"repositories\"} " + std::to_string(denied_repositories_) +
                      "\n");
}

}  // namespace berth::registry
