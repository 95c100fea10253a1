#pragma once
// What the signature verifier is configured with (docs/policies.md).
#include <string>
#include <vector>

namespace berth::trust {

// A policy's require_signature (config `policies[].require_signature`).
struct SignatureRule {
    std::string policy;             // the policy's name, as registry::Policy names it
    std::vector<std::string> keys;  // PEM public key files (ECDSA, RSA, Ed25519)
    bool match_repository = false;  // a simple-signing payload's docker-reference must name the repository
};

}  // namespace berth::trust
