#pragma once
// Policies per repository glob (the top-level `policies` list; the first policy whose repositories
// match applies), each holding rules of a few kinds: immutable tags, required signatures, approved
// base images (docs/policies.md). A kind of rule is one file, src/registry/policy_<kind>.cpp,
// behind PolicyRule, and its section of a policy's configuration (config/policy_config.cpp). The
// registry asks every rule of the policy at each point a manifest passes, on every way in (push,
// import, mirror fill) and every read; whether a signature exists and verifies is answered through
// SignatureCheck, which trust/ implements with each policy's keys (trust/verifier.hpp).
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "berth/oci/digest.hpp"
#include "berth/oci/manifest.hpp"
#include "berth/registry/upstreams.hpp"

namespace berth::registry {

struct Policy;
class PolicyEnforcement;  // what rules work with: the registry's store and seams (policy_enforcement.hpp)

// A manifest on its way into the store: a push, an import, a mirror fill.
struct Entry {
    const std::string& repo;
    const oci::Digest& digest;
    const oci::ParsedManifest& parsed;
    const std::vector<std::string>& tags;  // the tags it is put under
};

// A client's read of a manifest (a peer reading through is judged where its client asked).
struct ManifestRead {
    const std::string& repo;
    const std::string& reference;
    const oci::Digest& digest;
    const std::string& media_type;
    const std::string& bytes;
    Asker asker;
};

// A deletion: of a tag (tag set), or of a manifest by digest (tag empty).
struct Removal {
    const std::string& repo;
    const std::string& tag;
    const std::string& digest;
};

// One kind of rule, as one policy configured it. Each point throws oci::Error (DENIED, through
// PolicyEnforcement::refuse) to refuse; refusing changes nothing.
class PolicyRule {
public:
    virtual ~PolicyRule() = default;
    // Before the write lock: checks that refuse.
    virtual void before_write(const Policy&, const Entry&, PolicyEnforcement&) const {}
    // Then, once every rule's check and the quotas passed, what peers must promise (waiting on them
    // is allowed here): a promise for a push refused afterwards would stay given.
    virtual void claim(const Policy&, const Entry&, PolicyEnforcement&) const {}
    // Under the write lock: the store as the commit will find it.
    virtual void under_write_lock(const Policy&, const Entry&, PolicyEnforcement&) const {}
    virtual void read(const Policy&, const ManifestRead&, PolicyEnforcement&) const {}
    virtual void remove(const Policy&, const Removal&, PolicyEnforcement&) const {}
    // Tags under it never move: retention keeps them, the web UI says so.
    virtual bool keeps_tags() const { return false; }
    // Its reads are judged: planned off the I/O threads (judging may read and verify signatures).
    virtual bool judges_reads() const { return false; }
};

struct Policy {
    std::string name;  // "policies[0]", named in refusals
    std::vector<std::string> repositories;
    std::vector<std::shared_ptr<const PolicyRule>> rules;

    bool keeps_tags() const;
    bool judges_reads() const;
};

// The kinds of rule, each in its file.
std::shared_ptr<const PolicyRule> immutable_tags_rule();                             // policy_immutable_tags.cpp
std::shared_ptr<const PolicyRule> signature_rule();                                  // policy_signatures.cpp
std::shared_ptr<const PolicyRule> base_images_rule(std::vector<std::string> globs);  // policy_base_images.cpp

// The first policy whose repositories match repo; null when none does.
const Policy* policy_for(const std::vector<Policy>& policies, const std::string& repo);

// cosign's simple-signing layer: one signature, its payload the blob.
inline constexpr std::string_view simple_signing_type = "application/vnd.dev.cosign.simplesigning.v1+json";
// cosign's tag for a manifest's signatures: sha256-<hex>.sig.
std::string signature_tag(const oci::Digest& digest);

class SignatureCheck {
public:
    virtual ~SignatureCheck() = default;
    // "" when a signature by one of the keys of the policy named `policy` exists in repo for
    // digest; otherwise why not: "unsigned", or what the signatures found got wrong.
    virtual std::string unsigned_reason(const std::string& policy, const std::string& repo,
                                        const oci::Digest& digest) = 0;
};

}  // namespace berth::registry
