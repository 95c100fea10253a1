#include "usage_tally.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "berth/oci/names.hpp"
#include "berth/storage/layout.hpp"

namespace berth::storage {

using nlohmann::json;

NamespaceUsage decode_totals(std::string_view value) {
    auto j = json::parse(value);
    return {j.at("b").get<std::uint64_t>(), j.at("r").get<std::uint64_t>()};
}

RepositoryUsage decode_repository_totals(std::string_view value) {
    auto j = json::parse(value);
    return {j.at("b").get<std::uint64_t>(), j.at("t").get<std::uint64_t>(), j.at("m").get<std::uint64_t>(),
            j.at("p").get<std::uint64_t>()};
}

UsageTally::RepositoryTotals& UsageTally::repository(std::string_view repo) {
    auto it = repositories_.find(std::string(repo));
    if (it != repositories_.end()) return it->second;
    RepositoryTotals entry;
    if (auto value = read_(layout::usage_repository_key(repo)))
        entry.before = entry.after = decode_repository_totals(*value);
    return repositories_.emplace(std::string(repo), entry).first->second;
}

UsageTally::BlobEntry& UsageTally::blob(std::string_view ns, std::string_view digest) {
    auto key = layout::usage_blob_key(ns, digest);
    auto it = blobs_.find(key);
    if (it != blobs_.end()) return it->second;
    BlobEntry entry;
    if (auto value = read_(key)) {
        auto j = json::parse(*value);
        entry = {j.at("n").get<std::uint64_t>(), j.at("b").get<std::uint64_t>()};
    }
    return blobs_.emplace(std::move(key), entry).first->second;
}

UsageTally::Totals& UsageTally::totals(std::string_view ns) {
    auto it = totals_.find(std::string(ns));
    if (it != totals_.end()) return it->second;
    Totals entry;
    if (auto value = read_(layout::usage_total_key(ns))) entry.before = entry.after = decode_totals(*value);
    return totals_.emplace(std::string(ns), entry).first->second;
}

void UsageTally::link(std::string_view repo, std::string_view digest, bool was, bool now, std::uint64_t size) {
    if (was == now) return;
    const auto ns = oci::namespace_of(repo);
    auto& entry = blob(ns, digest);
    auto& sums = totals(ns);
    auto& held = repository(repo).after;
    if (now) {
        if (entry.links++ == 0) {
            entry.bytes = size;
            sums.after.bytes += size;
        }
        held.bytes += size;
    } else if (entry.links > 0) {
        held.bytes -= std::min(held.bytes, entry.bytes);
        if (--entry.links == 0) sums.after.bytes -= std::min(sums.after.bytes, entry.bytes);
    }
    // (No entry to take from: a store not counted yet, unlinked by `berth gc`
    // before its first serve; the count at that start covers it.)
}

void UsageTally::repository_added(std::string_view repo) { ++totals(oci::namespace_of(repo)).after.repositories; }

void UsageTally::tag(std::string_view repo, bool was, bool now, std::uint64_t clock) {
    auto& held = repository(repo).after;
    if (now) held.last_push = std::max(held.last_push, clock);
    if (was == now) return;
    if (now) ++held.tags;
    else held.tags -= std::min<std::uint64_t>(held.tags, 1);
}

void UsageTally::manifest(std::string_view repo, bool was, bool now, std::uint64_t clock) {
    auto& held = repository(repo).after;
    if (now) held.last_push = std::max(held.last_push, clock);
    if (was == now) return;
    if (now) ++held.manifests;
    else held.manifests -= std::min<std::uint64_t>(held.manifests, 1);
}

std::vector<UsageChange> UsageTally::changes() const {
    std::vector<UsageChange> out;
    for (auto& [ns, sums] : totals_) out.push_back({ns, sums.before, sums.after});
    return out;
}

std::vector<std::pair<std::string, std::optional<std::string>>> UsageTally::writes() const {
    std::vector<std::pair<std::string, std::optional<std::string>>> out;
    for (auto& [key, entry] : blobs_) {
        if (entry.links == 0) out.emplace_back(key, std::nullopt);
        else out.emplace_back(key, json{{"n", entry.links}, {"b", entry.bytes}}.dump());
    }
    for (auto& [ns, sums] : totals_)
        if (sums.after != sums.before)
            out.emplace_back(layout::usage_total_key(ns),
                             json{{"b", sums.after.bytes}, {"r", sums.after.repositories}}.dump());
    for (auto& [repo, held] : repositories_)
        if (held.after != held.before)
            out.emplace_back(layout::usage_repository_key(repo), json{{"b", held.after.bytes},
                                                                      {"t", held.after.tags},
                                                                      {"m", held.after.manifests},
                                                                      {"p", held.after.last_push}}
                                                                     .dump());
    return out;
}

}  // namespace berth::storage
