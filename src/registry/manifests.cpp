// Manifest operations of the Registry: put, get, delete.
#include <algorithm>

#include "berth/oci/error.hpp"
#include "berth/oci/manifest.hpp"
#include "berth/oci/media_types.hpp"
#include "berth/oci/names.hpp"
#include "berth/registry/registry.hpp"
#include "berth/storage/blob_store.hpp"
#include "berth/storage/meta_store.hpp"
#include "berth/storage/events.hpp"
#include "berth/storage/pull_times.hpp"
#include "upload_table.hpp"
#include "validate.hpp"

namespace berth::registry {

using oci::Error;
using oci::ErrorCode;

namespace {

constexpr std::size_t max_tags_per_push = 64;

std::string media_type_without_parameters(const std::string& content_type) {
    auto end = content_type.find(';');
    auto value = content_type.substr(0, end);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.pop_back();
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.erase(0, 1);
    return value;
}

[[noreturn]] void missing(const oci::Descriptor& descriptor, const char* what) {
    throw Error(ErrorCode::manifest_blob_unknown, std::string(what) + " referenced by the manifest is unknown",
                descriptor.digest.str());
}

}  // namespace

PutManifestResult Registry::put_manifest(const std::string& repo, const std::string& reference,
                                         const std::string& content_type, std::string body,
                                         const std::vector<std::string>& extra_tags, const std::string& principal) {
    require_name(repo);
    require_writable(options_);
    auto ref = parse_reference(reference, Access::write);
    if (body.size() > options_.max_manifest_bytes)
        throw Error(ErrorCode::payload_too_large, "manifest is larger than the registry accepts",
                    "limit " + std::to_string(options_.max_manifest_bytes) + " bytes");
    if (extra_tags.size() > max_tags_per_push) throw Error(ErrorCode::manifest_invalid, "too many tags in one push");

    const auto* by_digest = std::get_if<oci::Digest>(&ref);
    auto digest = oci::Digest::of(by_digest ? by_digest->algorithm() : oci::DigestAlgorithm::sha256, body);
    if (by_digest && *by_digest != digest)
        throw Error(ErrorCode::digest_invalid, "manifest does not match the digest in the reference",
                    "computed " + digest.str());

    auto parsed = oci::parse_manifest(body, media_type_without_parameters(content_type));
    uploads_->require_space(body.size());
    // What a sparse repository lacks is accepted; what it holds must still match.
    const bool sparse = oci::matches_any(options_.sparse_manifests, repo);
    std::vector<oci::Descriptor> blobs;
    for (auto& d : parsed.local_blobs()) {
        const auto found = find_blob(repo, d.digest);
        auto size = found == Lookup::here ? blobs_.size(d.digest) : std::nullopt;
        if (!size && sparse) continue;
        // A replica that acknowledged the blob may be the one down: worth a retry, not a refusal.
        if (found == Lookup::unknown)
            throw Error(ErrorCode::unavailable, "a blob the manifest references may be on a replica out of reach",
                        d.digest.str());
        if (!size) missing(d, "blob");
        if (*size != static_cast<std::uint64_t>(d.size))
            throw Error(ErrorCode::manifest_invalid, "descriptor size does not match the blob", d.digest.str());
        blobs.push_back(d);
    }
    for (auto& child : parsed.manifests) {
        auto record = meta_.manifest(repo, child.digest.str());
        if (!record && peers_ && peers_->fetch_manifest(repo, child.digest.str()))
            record = meta_.manifest(repo, child.digest.str());
        if (!record || record->deleted) {
            if (sparse) continue;
            missing(child, "manifest");
        }
        if (record->bytes.size() != static_cast<std::size_t>(child.size))
            throw Error(ErrorCode::manifest_invalid, "descriptor size does not match the manifest", child.digest.str());
    }

    std::vector<std::string> tags;
    if (auto* tag = std::get_if<std::string>(&ref)) tags.push_back(*tag);
    for (auto& tag : extra_tags) {
        require_tag(tag);
        if (std::find(tags.begin(), tags.end(), tag) == tags.end()) tags.push_back(tag);
    }

    // Under the lock garbage collection takes to unlink: the blobs are still linked, and old
    // links are renewed so the next collection keeps them; an untagged child may have been
    // deleted (gc, retention) since it was checked.
    auto recheck = [&](storage::MetaStore::Batch& batch, const storage::Stamp& stamp) {
        const auto now_ms = storage::HybridClock::physical_ms(stamp.clock);
        const auto half_grace_ms = static_cast<std::uint64_t>(options_.gc_grace.count()) * 500;
        const auto renew_before = now_ms > half_grace_ms ? now_ms - half_grace_ms : 0;
        for (auto& blob : blobs) {
            auto link = meta_.link(repo, blob.digest.str());
            if (!link || link->deleted) missing(blob, "blob");
            if (storage::HybridClock::physical_ms(link->stamp.clock) < renew_before)
                batch.record_link(repo, blob.digest.str(), stamp, false, static_cast<std::uint64_t>(blob.size));
        }
        for (auto& child : parsed.manifests) {
            auto record = meta_.manifest(repo, child.digest.str());
            if ((!record || record->deleted) && !sparse) missing(child, "manifest");
        }
    };
    admit_manifest({repo, digest, parsed, tags, Quorum::wait, principal}, std::move(body), recheck);
    return {digest, parsed.subject ? parsed.subject->digest.str() : std::string(), tags};
}

void Registry::admit_manifest(
    const Admission& what, std::string bytes,
    const std::function<void(storage::MetaStore::Batch&, const storage::Stamp&)>& under_lock) {
    const Entry entry{what.repo, what.digest, what.parsed, what.tags};
    enforce(PolicyPoint::before_write, entry);
    precheck_quotas(what, bytes);
    enforce(PolicyPoint::claim, entry);
    const auto digest_text = what.digest.str();
    auto lock = meta_.lock_writes();
    const auto stamp = this->stamp();
    enforce(PolicyPoint::under_write_lock, entry);
    storage::MetaStore::Batch batch({}, what.principal);
    if (under_lock) under_lock(batch, stamp);
    batch.record_manifest(what.repo, what.digest, what.parsed, std::move(bytes), stamp);
    for (auto& tag : what.tags) batch.record_tag(what.repo, tag, digest_text, stamp);
    enforce_quotas(batch);  // a first push into a repository adds one to its namespace
    if (what.quorum == Quorum::wait) return commit_replicated(lock, batch);
    try {
        commit_replicated(lock, batch);
    } catch (const Error& error) {
        // Stored here; replicas out of reach catch up from the log.
        if (error.code() != ErrorCode::unavailable) throw;
    }
}

Manifest Registry::get_manifest(const std::string& repo, const std::string& reference, Asker asker) {
    auto manifest = find_manifest(repo, reference, asker);
    // A peer reading through is judged where its client asked.
    if (asker == Asker::client)
        enforce(ManifestRead{repo, reference, manifest.digest, manifest.media_type, manifest.bytes, asker});
    // A peer reading through is not a pull: the replica its client asked notes that one.
    if (pulls_ && asker == Asker::client) {
        const bool by_digest = reference.find(':') != std::string::npos;
        pulls_->pulled(repo, by_digest ? manifest.digest.str() : reference, uploads_->now());
    }
    return manifest;
}

Manifest Registry::find_manifest(const std::string& repo, const std::string& reference, Asker asker) {
    require_name(repo);
    if (upstreams_ && upstreams_->mirrors(repo)) return get_mirrored_manifest(repo, reference, asker);
    auto ref = parse_reference(reference, Access::read);
    auto unknown = [&]() -> Error {
        if (!meta_.has_repository(repo)) return Error(ErrorCode::name_unknown, "repository name not known to registry");
        return Error(ErrorCode::manifest_unknown, "manifest unknown", reference);
    };
    // Read-through only for what this replica has no record of at all: a
    // tombstone here is an answer, not a gap.
    auto fetched = [&](const std::string& reference_text) {
        return peers_ && peers_->fetch_manifest(repo, reference_text);
    };
    std::string digest_text;
    if (auto* tag = std::get_if<std::string>(&ref)) {
        auto record = meta_.tag(repo, *tag);
        if (!record && fetched(*tag)) record = meta_.tag(repo, *tag);
        if (!record || record->deleted()) throw unknown();
        digest_text = record->digest;
    } else {
        digest_text = std::get<oci::Digest>(ref).str();
    }
    auto record = meta_.manifest(repo, digest_text);
    if (!record && fetched(digest_text)) record = meta_.manifest(repo, digest_text);
    if (!record || record->deleted) throw unknown();
    return {*oci::Digest::parse(digest_text), record->media_type, std::move(record->bytes)};
}

void Registry::delete_manifest(const std::string& repo, const std::string& reference, const std::string& principal) {
    require_name(repo);
    require_writable(options_);
    auto ref = parse_reference(reference, Access::read);
    if (!options_.deletes_enabled) throw Error(ErrorCode::unsupported, "deletes are disabled");
    if (!meta_.has_repository(repo)) throw Error(ErrorCode::name_unknown, "repository name not known to registry");
    auto lock = meta_.lock_writes();
    const auto stamp = this->stamp();
    storage::MetaStore::Batch batch({}, principal);
    if (auto* tag = std::get_if<std::string>(&ref)) {
        auto record = meta_.tag(repo, *tag);
        if (!record || record->deleted()) throw Error(ErrorCode::manifest_unknown, "tag unknown", *tag);
        enforce(Removal{repo, *tag, record->digest});
        batch.record_tag(repo, *tag, "", stamp);
    } else {
        const auto digest_text = std::get<oci::Digest>(ref).str();
        auto record = meta_.manifest(repo, digest_text);
        if (!record || record->deleted) throw Error(ErrorCode::manifest_unknown, "manifest unknown", digest_text);
        const std::string untagged;
        enforce(Removal{repo, untagged, digest_text});
        for (auto& tag : meta_.tags_of(repo, digest_text)) batch.record_tag(repo, tag, "", stamp);
        batch.tombstone_manifest(repo, digest_text, &*record, stamp);
    }
    commit_replicated(lock, batch);
}

}  // namespace berth::registry
