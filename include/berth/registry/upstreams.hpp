#pragma once
// What the registry needs to mirror other registries, and no more: registry
// owns this seam, proxy implements it (proxy/proxy.hpp), so registry never
// sees how upstreams are reached.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "berth/oci/digest.hpp"
#include "berth/storage/blob_store.hpp"

namespace berth::registry {

// Where a read was answered from, for the access log and metrics.
enum class Cache {
    none,     // not a mirrored repository
    hit,      // from what is stored here, current as far as anyone knows
    fetched,  // from the upstream, now stored here
    stale,    // from what is stored here, the upstream out of reach
};
const char* cache_name(Cache cache);

// Who is reading: a client, or a replica that delegated its fetch to this
// one (which then fetches itself rather than delegate again).
enum class Asker { client, replica };

struct UpstreamManifest {
    oci::Digest digest;  // verified against the bytes
    std::string media_type;
    std::string bytes;
};

struct ManifestAnswer {
    enum class Status {
        current,      // what is cached here is what the upstream has
        fetched,      // manifest holds the upstream's, new here
        missing,      // the upstream has no such manifest
        unreachable,  // no answer, or a 5xx: serve what is cached
    } status = Status::unreachable;
    std::optional<UpstreamManifest> manifest;
};

struct TagPage {
    std::vector<std::string> tags;
    bool more = false;
};

// An upstream as the web UI's mirrors page shows it.
struct MirrorStatus {
    std::string host;  // the repository name prefix; "" for the agent's replicas
    std::vector<std::string> urls;
    std::uint64_t hits = 0, misses = 0, stale = 0, fetched_bytes = 0, errors = 0;
    std::optional<bool> reachable;  // as the last answer or failure said; nullopt before either
    std::string last_error;
};

// The registry's one way in, as a fetch sees it: a blob fetched from an upstream is admitted and
// linked under the same quotas as a pushed one (the registry implements it).
class FetchIntake {
public:
    virtual ~FetchIntake() = default;
    // Throws oci::Error(DENIED), counted, when linking size bytes of digest into repo would pass a
    // quota: checked once the upstream says how large it is, before a byte is stored.
    virtual void admit(const std::string& repo, const oci::Digest& digest, std::uint64_t size) = 0;
    // Links a stored, verified blob into each repository, each within its quota (what a quota
    // refuses stays unlinked, for garbage collection).
    virtual void link_fetched(const std::vector<std::string>& repos, const oci::Digest& digest) = 0;
};

class Upstreams {
public:
    virtual ~Upstreams() = default;
    // True when repo (HOST/NAME) mirrors an upstream, so a miss is fetched.
    virtual bool mirrors(const std::string& repo) const = 0;
    // The host pulls without ns or host prefix go to (a plain mirror); "" for none.
    virtual std::string default_host() const = 0;
    // reference is a tag or digest; cached the digest stored here for that tag.
    // A tag checked within its upstream's interval is `current` without asking.
    virtual ManifestAnswer fetch_manifest(const std::string& repo, const std::string& reference,
                                          const std::optional<std::string>& cached, Asker asker) = 0;
    // The blob, fetched from upstream once however many ask at once, admitted and linked to repo
    // through intake once stored; it may still be arriving (OpenBlob::filling). nullopt when it
    // cannot be had now; a quota's refusal is thrown (DENIED).
    virtual std::optional<storage::OpenBlob> fetch_blob(const std::string& repo, const oci::Digest& digest, Asker asker,
                                                        FetchIntake& intake) = 0;
    // Waits for the fetches still writing through an intake: its registry calls this before it goes.
    virtual void finish_fetches() {}
    // One page of the upstream's tags (at most limit, after last); nullopt when
    // it cannot say now, so what is stored here is listed instead.
    virtual std::optional<TagPage> list_tags(const std::string& repo, std::size_t limit, const std::string& last) = 0;
    // Counts a read answered without the upstream (hit or stale).
    virtual void count(const std::string& repo, Cache cache) = 0;
    // A cached blob was read: the cache keeps the recently used.
    virtual void touched(const oci::Digest&) {}
    virtual std::vector<MirrorStatus> mirror_status() const { return {}; }
};

}  // namespace berth::registry
