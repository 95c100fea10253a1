// Where the policies' rules are asked (registry/policies.hpp, docs/policies.md), and what they work
// with (policy_enforcement.hpp). Each refusal is 403 DENIED naming the policy and the reason, changes
// nothing, and is counted and audited.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>

#include "berth/oci/error.hpp"
#include "berth/oci/manifest.hpp"
#include "berth/observe/log.hpp"
#include "berth/registry/registry.hpp"
#include "berth/storage/filling_blob.hpp"
#include "berth/storage/meta_store.hpp"
#include "policy_enforcement.hpp"
#include "policy_memory.hpp"

namespace berth::registry {

using oci::Error;
using oci::ErrorCode;

struct Registry::Enforcement final : PolicyEnforcement {
    explicit Enforcement(Registry& r) : registry(r) {}
    Registry& registry;

    const storage::MetaStore& meta() const override { return registry.meta_; }
    const storage::BlobStore& blobs() const override { return registry.blobs_; }
    bool attachment(const oci::Digest& digest, const oci::ParsedManifest& parsed) const override {
        return registry.attachment(digest, parsed);
    }
    [[noreturn]] void refuse(const Policy& policy, const char* reason, const std::string& message,
                             const std::string& repo, const std::string& reference) override {
        count(policy, reason);
        observe::log("info", "audit",
                     {{"action", "refused"},
                      {"policy", policy.name},
                      {"reason", reason},
                      {"repository", repo},
                      {"reference", reference},
                      {"message", message}});
        throw Error(ErrorCode::denied, policy.name + ": " + message, reference);
    }
    void count(const Policy& policy, const char* reason) override {
        registry.policy_memory_->count(policy.name, reason);
    }
    std::optional<TagClaim> claim_tag(const std::string& repo, const std::string& tag,
                                      const std::string& digest) override {
        if (registry.peers_) return registry.peers_->claim_tag(repo, tag, digest);
        if (!registry.options_.detached) return std::nullopt;
        return TagClaim{TagClaim::Outcome::undecided, {}, "the replica is stopped: import through its API"};
    }
    std::string unsigned_reason(const Policy& policy, const std::string& repo, const oci::Digest& digest) override {
        return registry.signatures_ ? registry.signatures_->unsigned_reason(policy.name, repo, digest)
                                    : std::string("no signature verifier");
    }
    void fetch_mirrored_signature(const std::string& repo, const oci::Digest& digest, Asker asker) override {
        registry.fetch_mirrored_signature(repo, digest, asker);
    }
    std::optional<std::string> remembered_parent(const std::string& key) override {
        return registry.policy_memory_->parent_of(key);
    }
    void remember_parent(const std::string& key, const std::string& index) override {
        registry.policy_memory_->remember_parent(key, index);
    }
};

Registry::PolicyGate::PolicyGate(Registry& registry) : enforcement(std::make_unique<Enforcement>(registry)) {}
Registry::PolicyGate::~PolicyGate() = default;

void Registry::enforce(PolicyPoint point, const Entry& entry) {
    const auto* policy = policy_for(options_.policies, entry.repo);
    if (!policy) return;
    auto& with = *gate_.enforcement;
    for (auto& rule : policy->rules) switch (point) {
            case PolicyPoint::before_write: rule->before_write(*policy, entry, with); break;
            case PolicyPoint::claim: rule->claim(*policy, entry, with); break;
            case PolicyPoint::under_write_lock: rule->under_write_lock(*policy, entry, with); break;
        }
}

void Registry::enforce(const ManifestRead& read) {
    if (const auto* policy = policy_for(options_.policies, read.repo))
        for (auto& rule : policy->rules) rule->read(*policy, read, *gate_.enforcement);
}

void Registry::enforce(const Removal& removal) {
    if (const auto* policy = policy_for(options_.policies, removal.repo))
        for (auto& rule : policy->rules) rule->remove(*policy, removal, *gate_.enforcement);
}

bool Registry::signatures_required(const std::string& repo) const {
    const auto* policy = policy_for(options_.policies, repo);
    return policy && policy->judges_reads();
}

void Registry::fetch_mirrored_signature(const std::string& repo, const oci::Digest& digest, Asker asker) {
    if (!upstreams_ || !upstreams_->mirrors(repo)) return;
    constexpr std::size_t max_signature_layers = 16;
    constexpr auto wait = std::chrono::seconds(30);
    try {
        auto signature = get_mirrored_manifest(repo, signature_tag(digest), asker);
        auto parsed = oci::parse_manifest(signature.bytes, signature.media_type);
        for (std::size_t i = 0; i < parsed.layers.size() && i < max_signature_layers; ++i) {
            if (parsed.layers[i].media_type != simple_signing_type) continue;
            auto read = open_mirrored_blob(repo, parsed.layers[i].digest, asker);
            if (!read || !read->blob.filling()) continue;
            // The verifier reads the stored file: wait for the fetch to be verified and kept
            // (FillingBlob holds the last byte back until then).
            auto filling = read->blob.filling();
            struct Wake {
                std::mutex mutex;
                std::condition_variable ready;
                bool woken = false;
            };
            const auto deadline = std::chrono::steady_clock::now() + wait;
            while (filling->readable() < filling->size() && !filling->failed() &&
                   std::chrono::steady_clock::now() < deadline) {
                // Shared: the writer may call back after this wait has given up.
                auto wake = std::make_shared<Wake>();
                filling->when_readable(filling->readable(), [wake] {
                    std::lock_guard lock(wake->mutex);
                    wake->woken = true;
                    wake->ready.notify_all();
                });
                std::unique_lock lock(wake->mutex);
                wake->ready.wait_until(lock, deadline, [&] { return wake->woken; });
            }
        }
    } catch (const std::exception&) {
        // No signature upstream, or none to be had now: judged on what is stored here.
    }
}

}  // namespace berth::registry
