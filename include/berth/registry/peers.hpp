#pragma once
// What the registry needs from the other replicas, and no more: registry owns
// this seam, replication implements it, so registry never sees how replicas talk.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "berth/oci/digest.hpp"
#include "berth/storage/events.hpp"

namespace berth::registry {

// What asking the other replicas for something this one lacks came to.
enum class Lookup {
    here,     // copied: it is local now
    absent,   // every replica answered, and none has it
    unknown,  // none that answered has it, but some could not be asked
};

// How a claim on a new immutable tag came out (docs/ha.md).
struct TagClaim {
    enum class Outcome {
        granted,    // a majority of replicas promised this digest: the tag may be written
        taken,      // enough replicas promised another digest that this one can never have a majority
        undecided,  // neither, with some replicas out of reach: nothing may be written
    } outcome = Outcome::undecided;
    std::string holder;  // taken: the digest they promised
    std::string detail;
};

class Peers {
public:
    virtual ~Peers() = default;
    // Read-through: copies a blob another replica acknowledged and this one lacks.
    virtual Lookup fetch_blob(const std::string& repo, const oci::Digest& digest) = 0;
    virtual bool fetch_manifest(const std::string& repo, const std::string& reference) = 0;
    // Returns once the configured write quorum holds these events' results;
    // throws oci::Error(unavailable) when that does not happen in time.
    virtual void replicate(const std::vector<storage::Event>& events) = 0;
    // Asks every replica, this one included, to promise digest for a tag of repo that none
    // has yet. A replica promises one digest per tag, durably, and never another.
    virtual TagClaim claim_tag(const std::string& repo, const std::string& tag, const std::string& digest) = 0;
    // Retention (registry/retention.hpp) judges each repository on one
    // replica per round: whether that is this one.
    virtual bool evaluates(const std::string& repo) = 0;
    // The names (tags and digests) of repo that the other replicas served to
    // clients at or after since_ms, with when; nullopt when one could not be asked.
    virtual std::optional<std::vector<std::pair<std::string, std::uint64_t>>> pulls_elsewhere(
        const std::string& repo, std::uint64_t since_ms) = 0;
};

}  // namespace berth::registry
