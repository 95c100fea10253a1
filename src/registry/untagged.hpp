#pragma once
// Untagged manifests that may go, one repository at a time: the one rule
// behind garbage collection's gc.delete_untagged and retention policies'
// delete_untagged_after.
//
// A live manifest is kept when it is tagged, stamped after the cutoff, a child
// of a kept index, or a referrer of a kept manifest (and what a kept manifest
// lists or is referred to by is kept in turn); the repository's other live
// manifests go. They go parents first: a manifest goes only once every index
// listing it, and its subject, went before it in this sweep. One that changed
// since it was read (pushed again, so tagged again perhaps) is left, and so is
// everything hanging off it; so is what an index pushed meanwhile lists (the
// change log since the read says which).
//
// Memory: a few dozen bytes per manifest of the one repository, plus the
// digests of those that may go.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "berth/storage/hybrid_clock.hpp"

namespace berth::storage {
class MetaStore;
}

namespace berth::registry {

// 64 bits of hash of a digest's text. Sets of these stay small with millions
// of manifests; a collision can only keep a manifest that could have gone.
std::uint64_t fingerprint(std::string_view digest);

struct UntaggedSweep {
    std::string repo;
    std::vector<std::uint64_t> tagged;  // fingerprints of the digests the repository's tags point at
    std::uint64_t cutoff_ms = 0;        // manifests stamped at or before this may go
    bool dry_run = false;               // report only, change nothing (a read-only store is fine)
};

// Tombstones what may go, with fresh stamps of `clock` under the write lock,
// a chunk at a time; calls gone(digest) for each manifest that went (or, dry,
// would go) and returns how many.
std::size_t sweep_untagged(storage::MetaStore& meta, storage::HybridClock& clock, const std::string& replica_id,
                           UntaggedSweep sweep, const std::function<void(const std::string& digest)>& gone);

}  // namespace berth::registry
