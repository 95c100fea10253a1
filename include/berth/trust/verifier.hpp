#pragma once
// Whether manifests are signed, for policies with require_signature
// (registry/policy_signatures.cpp): the signatures stored in the same repository,
// under cosign's sha256-<hex>.sig tag or attached through the referrers API,
// verified with the policy's keys. A judgement is kept per manifest and
// reused while the signatures found and the keys stay the same, so a pull
// of a signed image costs two index lookups, no signature check.
#include <memory>
#include <string>
#include <vector>

#include "berth/observe/metrics.hpp"
#include "berth/registry/policies.hpp"
#include "berth/trust/options.hpp"

namespace berth::storage {
class BlobStore;
class MetaStore;
}  // namespace berth::storage

namespace berth::trust {

class Verifier : public registry::SignatureCheck {
public:
    // Reads every rule's keys now: throws std::runtime_error naming a file that cannot be used.
    Verifier(const std::vector<SignatureRule>& rules, const storage::MetaStore& meta, const storage::BlobStore& blobs);
    ~Verifier() override;

    std::string unsigned_reason(const std::string& policy, const std::string& repo, const oci::Digest& digest) override;
    void write_metrics(observe::MetricsWriter& out) const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace berth::trust
