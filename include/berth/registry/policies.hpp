#pragma once
// Policies per repository glob (the top-level `policies` list; the first
// policy whose repositories match applies): immutable tags, required
// signatures, approved base images. The registry enforces them; whether a
// signature exists and verifies is answered through SignatureCheck, which
// trust/ implements. docs/policies.md.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "berth/oci/digest.hpp"
#include "berth/oci/manifest.hpp"

namespace berth::registry {

struct SignatureRule {
    std::vector<std::string> keys;  // PEM public key files (ECDSA, RSA, Ed25519)
    bool match_repository = false;  // a simple-signing payload's docker-reference must name the repository
};

struct Policy {
    std::string name;  // "policies[0]", named in refusals
    std::vector<std::string> repositories;
    bool immutable_tags = false;
    std::optional<SignatureRule> require_signature;
    std::vector<std::string> base_images;  // REPOSITORY:TAG globs
};

// The first policy whose repositories match repo; null when none does.
const Policy* policy_for(const std::vector<Policy>& policies, const std::string& repo);

// cosign's simple-signing layer: one signature, its payload the blob.
inline constexpr std::string_view simple_signing_type = "application/vnd.dev.cosign.simplesigning.v1+json";
// cosign's tag for a manifest's signatures: sha256-<hex>.sig.
std::string signature_tag(const oci::Digest& digest);

class SignatureCheck {
public:
    virtual ~SignatureCheck() = default;
    // "" when a signature by one of the policy's keys exists in repo for digest; otherwise
    // why not: "unsigned", or what the signatures found got wrong.
    virtual std::string unsigned_reason(const Policy& policy, const std::string& repo, const oci::Digest& digest) = 0;
};

}  // namespace berth::registry
