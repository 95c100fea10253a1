#pragma once
#include "berth/registry/policies.hpp"
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace berth::registry {

// Limits for the namespaces (repository names up to the first '/') that
// `namespaces`, a glob, matches; each such namespace has limits of its own.
// 0: no limit.
struct QuotaRule {
    std::string namespaces;
    std::uint64_t max_bytes = 0;  // deduplicated bytes of the blobs linked into its repositories
    std::uint64_t max_repositories = 0;
};

struct Options {
    std::string replica_id = "berth";
    std::size_t max_manifest_bytes = 4 << 20;
    std::size_t max_uploads = 1000;  // concurrent upload sessions
    std::size_t max_uploads_per_client = 100;
    // Uploads and pushes are refused (507) once less than this is free on the
    // store's file system, so a full disk never corrupts what is already there.
    std::uint64_t min_free_bytes = 64ull << 20;
    std::uint64_t max_blob_bytes = 0;  // 0: no limit
    std::size_t max_page = 1000;       // clamp for n in tags and catalog lists
    std::chrono::seconds upload_idle_ttl{3600};
    bool deletes_enabled = true;
    // The node agent serves pulls only: pushes go to the replicas.
    bool pull_only = false;
    // Repository globs whose manifests may name blobs and child manifests
    // this registry does not hold (a cache of only the platforms pulled).
    std::vector<std::string> sparse_manifests;
    // Links younger than this survive garbage collection without a manifest;
    // a manifest push renews links older than half of it.
    std::chrono::seconds gc_grace{3600};
    // The first rule matching a namespace applies to it (docs/quotas.md).
    std::vector<QuotaRule> quotas;
    // Immutable tags, required signatures, approved bases (registry/policies.hpp).
    std::vector<Policy> policies;
    // A replica's store written while the replica is stopped (berth import --root): no majority can
    // be asked whether a new immutable tag is free, so one is refused rather than guessed.
    bool detached = false;
};

}  // namespace berth::registry
