#pragma once
// What the registry needs from the other replicas, and no more: registry owns
// this seam, replication implements it, so registry never sees how replicas talk.
#include <string>
#include <vector>

#include "berth/oci/digest.hpp"
#include "berth/storage/events.hpp"

namespace berth::registry {

class Peers {
public:
    virtual ~Peers() = default;
    // Read-through: copies what another replica acknowledged and this one
    // lacks. True when it is now local.
    virtual bool fetch_blob(const std::string& repo, const oci::Digest& digest) = 0;
    virtual bool fetch_manifest(const std::string& repo, const std::string& reference) = 0;
    // Returns once the configured write quorum holds these events' results;
    // throws oci::Error(unavailable) when that does not happen in time.
    virtual void replicate(const std::vector<storage::Event>& events) = 0;
};

}  // namespace berth::registry
