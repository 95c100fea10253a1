// What every policy shares (policies.hpp); each kind of rule is a file of its own.
#include "berth/registry/policies.hpp"

#include "berth/oci/names.hpp"

namespace berth::registry {

bool Policy::keeps_tags() const {
    for (auto& rule : rules)
        if (rule->keeps_tags()) return true;
    return false;
}

bool Policy::judges_reads() const {
    for (auto& rule : rules)
        if (rule->judges_reads()) return true;
    return false;
}

const Policy* policy_for(const std::vector<Policy>& policies, const std::string& repo) {
    for (auto& policy : policies)
        if (oci::matches_any(policy.repositories, repo)) return &policy;
    return nullptr;
}

std::string signature_tag(const oci::Digest& digest) {
    return std::string(oci::algorithm_name(digest.algorithm())) + "-" + digest.hex() + ".sig";
}

}  // namespace berth::registry
