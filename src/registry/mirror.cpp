// Reads of repositories that mirror an upstream registry: a miss is fetched,
// a cached tag is re-validated, and what is stored here is served when the
// upstream is out of reach (offline first). How upstreams are reached is the
// Upstreams seam's business.
#include <nlohmann/json.hpp>

#include "berth/observe/log.hpp"
#include "berth/oci/error.hpp"
#include "berth/oci/manifest.hpp"
#include "berth/oci/names.hpp"
#include "berth/registry/registry.hpp"
#include "validate.hpp"

namespace berth::registry {

using oci::Error;
using oci::ErrorCode;

const char* cache_name(Cache cache) {
    switch (cache) {
        case Cache::hit: return "hit";
        case Cache::fetched: return "fetched";
        case Cache::stale: return "stale";
        case Cache::none: break;
    }
    return "";
}

std::string Registry::repository_of(const std::string& name, const std::optional<std::string>& ns, bool read) {
    if (ns) {
        if (!oci::valid_registry_host(*ns)) throw Error(ErrorCode::name_invalid, "invalid ns parameter");
        if (ns->find(':') != std::string::npos)
            throw Error(ErrorCode::name_unknown, "no repository here can hold a namespace with a port", *ns);
        return *ns + "/" + name;
    }
    if (!read || !upstreams_ || upstreams_->mirrors(name)) return name;
    auto fallback = upstreams_->default_host();
    if (fallback.empty() || meta_.has_repository(name)) return name;
    return fallback + "/" + name;
}

Manifest Registry::get_mirrored_manifest(const std::string& repo, const std::string& reference, Asker asker) {
    auto ref = parse_reference(reference, Access::read);
    const auto* tag = std::get_if<std::string>(&ref);
    std::optional<std::string> cached;
    if (tag) {
        if (auto record = meta_.tag(repo, *tag); record && !record->deleted()) cached = record->digest;
    } else if (auto record = meta_.manifest(repo, reference); record && !record->deleted) {
        // A digest names the same bytes forever: never asked again.
        upstreams_->count(repo, Cache::hit);
        return {std::get<oci::Digest>(ref), record->media_type, std::move(record->bytes), Cache::hit};
    }
    auto answer = upstreams_->fetch_manifest(repo, reference, cached, asker);
    if (answer.status == ManifestAnswer::Status::fetched && answer.manifest) {
        try {
            store_mirrored_manifest(repo, reference, *answer.manifest);
            auto& m = *answer.manifest;
            return {m.digest, m.media_type, std::move(m.bytes), Cache::fetched};
        } catch (const Error& error) {
            // A policy or quota refused it (counted and audited), or a tag's move could not be
            // decided: what is stored here still stands, and without it the refusal is the answer.
            const bool refused = error.code() == ErrorCode::denied || error.code() == ErrorCode::unavailable;
            if (refused && !cached) throw;
            // An answer that is no manifest is the upstream's fault, not the client's: as if the
            // upstream were out of reach, the cached copy is served, or MANIFEST_UNKNOWN.
            if (!refused)
                observe::log("warn", "upstream answered an unusable manifest",
                             {{"repository", repo}, {"reference", reference}, {"error", error.what()}});
            answer.status = ManifestAnswer::Status::unreachable;
        }
    }
    const auto cache = answer.status == ManifestAnswer::Status::current ? Cache::hit : Cache::stale;
    if (cached) {
        if (auto record = meta_.manifest(repo, *cached); record && !record->deleted) {
            upstreams_->count(repo, cache);
            return {*oci::Digest::parse(*cached), record->media_type, std::move(record->bytes), cache};
        }
    }
    // Neither here nor upstream: another replica may still hold it.
    if (peers_ && asker == Asker::client && peers_->fetch_manifest(repo, reference)) {
        auto digest_text = tag ? meta_.tag(repo, *tag).value_or(storage::TagRecord{}).digest : reference;
        if (auto record = meta_.manifest(repo, digest_text); record && !record->deleted)
            return {*oci::Digest::parse(digest_text), record->media_type, std::move(record->bytes), Cache::stale};
    }
    throw Error(ErrorCode::manifest_unknown, "manifest unknown here and upstream", reference);
}

// A mirror fill enters the store like a push: the same policies (an immutable tag the upstream
// moved stays where it was, an image on no approved base is refused) and quotas.
void Registry::store_mirrored_manifest(const std::string& repo, const std::string& reference,
                                       const UpstreamManifest& fetched) {
    if (fetched.bytes.size() > options_.max_manifest_bytes)
        throw Error(ErrorCode::manifest_invalid, "upstream manifest is larger than the registry accepts");
    auto parsed = oci::parse_manifest(fetched.bytes, fetched.media_type);
    // Its blobs are fetched when first read, not now: a pull asks for them next anyway.
    std::vector<std::string> tags;
    if (reference.find(':') == std::string::npos) tags.push_back(reference);
    admit_manifest({repo, fetched.digest, parsed, tags, Quorum::best_effort}, fetched.bytes);
}

std::optional<BlobRead> Registry::open_mirrored_blob(const std::string& repo, const oci::Digest& digest, Asker asker) {
    auto local = [&]() -> std::optional<storage::OpenBlob> {
        if (!meta_.has_link(repo, digest.str())) return std::nullopt;
        return blobs_.open(digest);
    };
    if (auto blob = local()) {
        upstreams_->count(repo, Cache::hit);
        upstreams_->touched(digest);
        return BlobRead{std::move(*blob), Cache::hit};
    }
    if (auto blob = upstreams_->fetch_blob(repo, digest, asker, *this))
        return BlobRead{std::move(*blob), Cache::fetched};
    if (peers_ && asker == Asker::client && peers_->fetch_blob(repo, digest) == Lookup::here)
        if (auto blob = local()) return BlobRead{std::move(*blob), Cache::stale};
    return std::nullopt;
}

}  // namespace berth::registry
