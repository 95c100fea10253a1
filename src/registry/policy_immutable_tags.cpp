// immutable_tags (docs/policies.md): a tag, once pushed, keeps its digest on every replica. A new
// tag is promised by a majority of replicas before it is written (replication/claims.cpp), so two
// replicas cannot each take a different digest for it; a tag held here is judged under the write
// lock; neither the tag nor the manifest it names may be deleted.
#include <nlohmann/json.hpp>

#include "berth/observe/log.hpp"
#include "berth/oci/error.hpp"
#include "berth/storage/meta_store.hpp"
#include "policy_enforcement.hpp"

namespace berth::registry {
namespace {

using oci::Error;
using oci::ErrorCode;

const char* outcome_name(TagClaim::Outcome outcome) {
    switch (outcome) {
        case TagClaim::Outcome::granted: return "granted";
        case TagClaim::Outcome::taken: return "taken";
        case TagClaim::Outcome::undecided: return "undecided";
    }
    return "undecided";
}

class ImmutableTags final : public PolicyRule {
public:
    // Before the write lock, since it waits on the peers, and after every check that could refuse
    // the push: a majority promise for each new tag.
    void claim(const Policy& policy, const Entry& entry, PolicyEnforcement& with) const override {
        const auto digest = entry.digest.str();
        for (auto& tag : entry.tags) {
            // A tag held here already is judged under the write lock.
            if (auto record = with.meta().tag(entry.repo, tag); record && !record->deleted()) continue;
            auto claim = with.claim_tag(entry.repo, tag, digest);
            if (!claim) continue;  // a replica alone: the write lock decides
            observe::log("info", "audit",
                         {{"action", "claim"},
                          {"policy", policy.name},
                          {"repository", entry.repo},
                          {"reference", tag + "@" + digest},
                          {"outcome", outcome_name(claim->outcome)},
                          {"detail", claim->detail}});
            if (claim->outcome == TagClaim::Outcome::granted) continue;
            if (claim->outcome == TagClaim::Outcome::taken)
                with.refuse(policy, "immutable_tag", "tag " + tag + " is immutable and promised to " + claim->holder,
                            entry.repo, tag);
            with.count(policy, "undecided");
            throw Error(
                ErrorCode::unavailable,
                "tag " + tag + " is immutable and too few replicas could be asked to decide it: nothing was written",
                claim->detail);
        }
    }

    void under_write_lock(const Policy& policy, const Entry& entry, PolicyEnforcement& with) const override {
        for (auto& tag : entry.tags) {
            auto record = with.meta().tag(entry.repo, tag);
            if (record && !record->deleted() && record->digest != entry.digest.str())
                with.refuse(policy, "immutable_tag", "tag " + tag + " is immutable and names " + record->digest,
                            entry.repo, tag);
        }
    }

    void remove(const Policy& policy, const Removal& removal, PolicyEnforcement& with) const override {
        if (!removal.tag.empty())
            with.refuse(policy, "immutable_tag", "tag " + removal.tag + " is immutable", removal.repo, removal.tag);
        auto tags = with.meta().tags_of(removal.repo, removal.digest);
        if (!tags.empty())
            with.refuse(policy, "immutable_tag", "the immutable tag " + tags.front() + " names this manifest",
                        removal.repo, removal.digest);
    }

    bool keeps_tags() const override { return true; }
};

}  // namespace

std::shared_ptr<const PolicyRule> immutable_tags_rule() { return std::make_shared<ImmutableTags>(); }

}  // namespace berth::registry
