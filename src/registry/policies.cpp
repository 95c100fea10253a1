#include "berth/registry/policies.hpp"

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

}  // namespace berth::registry
