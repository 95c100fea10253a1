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
    if (now) {
        if (entry.links++ == 0) {
            entry.bytes = size;
            sums.after.bytes += size;
        }
    } else if (entry.links > 0 && --entry.links == 0) {
        sums.after.bytes -= std::min(sums.after.bytes, entry.bytes);
    }
    // (No entry to take from: a store not counted yet, unlinked by `berth gc`
    // before its first serve; the count at that start covers it.)
}

void UsageTally::repository_added(std::string_view repo) { ++totals(oci::namespace_of(repo)).after.repositories; }

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
    return out;
}

}  // namespace berth::storage
