#pragma once
// The values berth keeps in its metadata index. Mutable state (tags and
// deletions) carries a stamp so that replicas agree on the newest write.
#include <cstdint>
#include <string>

namespace berth::storage {

struct Stamp {
    std::uint64_t clock = 0;  // hybrid logical clock value
    std::string replica;      // tie-breaker
    friend auto operator<=>(const Stamp&, const Stamp&) = default;
};

struct TagRecord {
    std::string digest;  // empty for a tombstone
    Stamp stamp;
    bool deleted() const { return digest.empty(); }
};

struct ManifestRecord {
    std::string media_type;
    std::string subject;        // digest of the subject, or empty
    std::string referrer_json;  // descriptor for the referrers API when subject is set
    std::string bytes;          // exactly as pushed; empty for a tombstone
    Stamp stamp;
    bool deleted = false;
    // The clock of the newest push of it that this replica logged; a tombstone keeps it, so a push
    // that reaches this replica after its delete is logged once (Batch::record_overtaken_manifest).
    std::uint64_t pushed = 0;
};

// A repository's claim on a blob; unlinking leaves a tombstone.
struct LinkRecord {
    Stamp stamp;
    bool deleted = false;
};

// What a namespace (a repository name up to its first '/') holds: the bytes
// of the distinct blobs its repositories link, and its repositories.
struct NamespaceUsage {
    std::uint64_t bytes = 0;
    std::uint64_t repositories = 0;
    friend bool operator==(const NamespaceUsage&, const NamespaceUsage&) = default;
};

// What one repository holds, for the web UI's listings: the bytes of the blobs it links (each once),
// its live tags and manifests, and when a tag or manifest was last pushed (hybrid clock,
// storage/hybrid_clock.hpp).
struct RepositoryUsage {
    std::uint64_t bytes = 0;
    std::uint64_t tags = 0;
    std::uint64_t manifests = 0;
    std::uint64_t last_push = 0;
    friend bool operator==(const RepositoryUsage&, const RepositoryUsage&) = default;
};

// A namespace's usage before and after a batch of writes.
struct UsageChange {
    std::string ns;
    NamespaceUsage before, after;
};

struct UploadRecord {
    std::string repository;
    std::string algorithm;
};

}  // namespace berth::storage
