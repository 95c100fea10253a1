#pragma once
// What a kind of policy rule works with (registry/policies.hpp): the store as the registry sees it,
// the registry's seams (peers, signatures, upstreams), its memory of judgements, and one way to
// refuse. The registry implements it (policy_checks.cpp); each rule kind is a file of its own.
#include <optional>
#include <string>

#include "berth/registry/peers.hpp"
#include "berth/registry/policies.hpp"
#include "berth/registry/registry.hpp"

namespace berth::registry {

class PolicyEnforcement {
public:
    virtual ~PolicyEnforcement() = default;
    virtual const storage::MetaStore& meta() const = 0;
    virtual const storage::BlobStore& blobs() const = 0;
    // What attachments.cpp says no runtime can run: exempt from every rule.
    virtual bool attachment(const oci::Digest& digest, const oci::ParsedManifest& parsed) const = 0;
    // Counts, audits and throws DENIED naming the policy and the reason.
    [[noreturn]] virtual void refuse(const Policy& policy, const char* reason, const std::string& message,
                                     const std::string& repo, const std::string& reference) = 0;
    // berth_policy_refusals_total{policy,reason} for a refusal that is not DENIED.
    virtual void count(const Policy& policy, const char* reason) = 0;
    // A majority's promise that tag names digest; nullopt for a registry without peers that need not
    // ask (a replica alone), undecided for one that cannot ask (a stopped replica's store).
    virtual std::optional<TagClaim> claim_tag(const std::string& repo, const std::string& tag,
                                              const std::string& digest) = 0;
    // Whether a signature by the policy's keys exists (the verifier's answer, or why not).
    virtual std::string unsigned_reason(const Policy& policy, const std::string& repo, const oci::Digest& digest) = 0;
    // A mirrored repository's signature (the upstream's .sig tag and its payloads), stored here
    // like any mirrored content before the manifest is judged.
    virtual void fetch_mirrored_signature(const std::string& repo, const oci::Digest& digest, Asker asker) = 0;
    // The signed index that last let a child be served (repo \0 child -> index).
    virtual std::optional<std::string> remembered_parent(const std::string& key) = 0;
    virtual void remember_parent(const std::string& key, const std::string& index) = 0;
};

}  // namespace berth::registry
