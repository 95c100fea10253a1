#pragma once
// The signature formats berth verifies, as cosign and containers/image write
// them (docs/policies.md): a simple-signing payload with its signature in a
// layer annotation (under the sha256-<hex>.sig tag, or attached through the
// referrers API), and a Sigstore bundle v0.3 holding a key-signed DSSE
// envelope around an in-toto statement. Each judge answers "" when the
// signature holds, else why not; all input is untrusted and bounded.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "berth/oci/digest.hpp"
#include "berth/registry/policies.hpp"
#include "keys.hpp"

namespace berth::trust {

inline constexpr std::string_view cosign_signature_artifact = "application/vnd.dev.cosign.artifact.sig.v1+json";
inline constexpr std::string_view bundle_v03_type = "application/vnd.dev.sigstore.bundle.v0.3+json";
inline constexpr std::size_t max_payload_bytes = 64 << 10;
inline constexpr std::size_t max_bundle_bytes = 256 << 10;

using Keys = std::vector<std::shared_ptr<PublicKey>>;

// What a signature must say beyond being signed.
struct Expectation {
    const oci::Digest& digest;
    const std::string& repository;
    bool match_repository;
};

// One simple-signing layer: its payload blob and its annotations (JSON object text).
std::string judge_simple_signing(std::string_view payload, std::string_view annotations_json, const Keys& keys,
                                 const Expectation& expected);
// One bundle layer's blob.
std::string judge_bundle(std::string_view bundle, const Keys& keys, const Expectation& expected);

// Whether a payload's docker-reference ("host[:port]/path[:tag|@digest]", or a bare path)
// names repository under any of its names: as stored here, or below a registry host.
bool names_repository(std::string_view reference, const std::string& repository);

// DSSE's pre-authentication encoding: "DSSEv1 <len> <type> <len> <payload>".
std::string pae(std::string_view type, std::string_view payload);

}  // namespace berth::trust
