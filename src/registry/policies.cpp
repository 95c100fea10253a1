#include "berth/registry/policies.hpp"

#include <algorithm>

#include "berth/oci/names.hpp"

namespace berth::registry {

const Policy* policy_for(const std::vector<Policy>& policies, const std::string& repo) {
    for (auto& policy : policies)
        if (oci::matches_any(policy.repositories, repo)) return &policy;
    return nullptr;
}

std::string signature_tag(const oci::Digest& digest) {
    return std::string(oci::algorithm_name(digest.algorithm())) + "-" + digest.hex() + ".sig";
}

// cosign's attachment tags (sha256-<hex>.sig, .att, .sbom) and the referrers API's fallback tag
// (sha256-<hex>).
bool attachment_tag(const std::string& tag) {
    constexpr std::size_t hex_end = 7 + 64;
    if (tag.size() < hex_end || !tag.starts_with("sha256-")) return false;
    if (tag.find_first_not_of("0123456789abcdef", 7) < hex_end) return false;
    const auto suffix = tag.substr(hex_end);
    return suffix.empty() || suffix == ".sig" || suffix == ".att" || suffix == ".sbom";
}

bool attachment_shape(const oci::ParsedManifest& parsed) {
    if (parsed.subject) return true;
    return !parsed.layers.empty() && std::all_of(parsed.layers.begin(), parsed.layers.end(),
                                                 [](auto& layer) { return layer.media_type == simple_signing_type; });
}

}  // namespace berth::registry
