// Applying a page of a peer's state in one batch: what makes a bootstrap run
// at thousands of records a second instead of one commit (and one lookup of
// every blob) per record.
#include <map>
#include <set>

#include "applier.hpp"
#include "berth/oci/error.hpp"
#include "berth/oci/manifest.hpp"
#include "berth/oci/names.hpp"
#include "berth/storage/blob_store.hpp"
#include "berth/storage/hybrid_clock.hpp"
#include "berth/storage/meta_store.hpp"

namespace berth::replication {

using storage::Event;
using storage::StatePart;
using storage::StateRecord;

namespace {

// Under the write lock: a push or an event may have come in since the first look.
bool newer_than_here(const storage::MetaStore& meta, StatePart part, const StateRecord& r) {
    auto local = meta.stamp_of(part, r.repo, r.key);
    return !local || local->first < r.stamp;
}

}  // namespace

ApplyResult Applier::apply_state(StatePart part, std::vector<StateRecord>& records,
                                 const std::vector<PeerClient*>& sources, unsigned parallelism,
                                 const std::atomic<bool>* stop) {
    std::vector<StateRecord*> newer;
    for (auto& r : records) {
        // A peer's names, checked as its events' are: a record that breaks them is not applied.
        const bool tags = part == StatePart::tags;
        if (r.key.empty() || !well_named(r.repo, r.stamp, tags ? r.key : std::string(), tags ? r.digest : r.key))
            continue;
        clock_.observe(r.stamp.clock);
        if (newer_than_here(meta_, part, r)) newer.push_back(&r);
    }
    if (newer.empty()) return ApplyResult::skipped;
    switch (part) {
        case StatePart::links: return apply_links(newer, sources, parallelism, stop);
        case StatePart::images:
        case StatePart::indexes: return apply_manifests(newer, sources, parallelism, stop);
        case StatePart::tags: return apply_tags(newer, sources);
    }
    return ApplyResult::skipped;
}

ApplyResult Applier::apply_links(std::vector<StateRecord*>& records, const std::vector<PeerClient*>& sources,
                                 unsigned parallelism, const std::atomic<bool>* stop) {
    std::vector<oci::Digest> wanted;
    std::set<std::string> seen;
    for (auto* r : records)
        if (auto digest = oci::Digest::parse(r->key); digest && !r->deleted && seen.insert(r->key).second)
            wanted.push_back(*digest);
    if (ensure_blobs(wanted, sources, parallelism, stop) == ApplyResult::unavailable) return ApplyResult::unavailable;

    // Sizes first: a store in a bucket answers them over the network, never under the write lock.
    std::map<std::string, std::optional<std::uint64_t>> sizes;
    for (auto* r : records)
        if (auto digest = oci::Digest::parse(r->key); digest && !sizes.count(r->key))
            sizes[r->key] = blobs_.size(*digest);
    storage::MetaStore::Batch batch;
    auto lock = meta_.lock_writes();
    for (auto* r : records) {
        if (!newer_than_here(meta_, StatePart::links, *r)) continue;
        auto known = sizes.find(r->key);
        auto size = known == sizes.end() ? std::nullopt : known->second;
        if (!r->deleted && !size) continue;  // gone everywhere: an unlink follows
        batch.record_link(r->repo, r->key, r->stamp, r->deleted, r->deleted ? 0 : *size);
    }
    meta_.commit(batch, storage::MetaStore::Durability::deferred);
    return ApplyResult::applied;
}

// A page's manifests sorted: those its batch commits (with what they are), those applied one by
// one (their bytes did not survive JSON, or their children are not here), and the blobs missing.
struct Applier::ManifestPage {
    struct Ready {
        storage::StateRecord* record;
        std::optional<oci::Digest> digest;  // of a live manifest
        oci::ParsedManifest parsed;
    };
    std::vector<Ready> ready;
    std::vector<storage::StateRecord*> single;
    std::vector<oci::Digest> missing;
    std::set<std::string> present, queued;  // blobs by digest: each is looked up once per page
};

void Applier::sort_manifest(storage::StateRecord* r, ManifestPage& page) {
    if (r->deleted) return page.ready.push_back({r, std::nullopt, {}});
    auto digest = oci::Digest::parse(r->key);
    if (!digest) return;
    // Bytes that are not UTF-8 do not survive JSON: such a manifest is asked for alone.
    if (oci::Digest::of(digest->algorithm(), r->bytes) != *digest) return page.single.push_back(r);
    oci::ParsedManifest parsed;
    try {
        parsed = oci::parse_manifest(r->bytes, r->media_type);
    } catch (const oci::Error&) {
        return;  // nothing valid to store under this digest
    }
    for (auto& child : parsed.manifests) {
        auto local = meta_.stamp_of(StatePart::images, r->repo, child.digest.str());
        if (!local || local->second) return page.single.push_back(r);
    }
    if (!is_mirrored(r->repo))
        for (auto& blob : parsed.local_blobs()) {
            auto text = blob.digest.str();
            if (page.present.count(text) || page.queued.count(text)) continue;
            if (blobs_.size(blob.digest)) page.present.insert(text);
            else if (page.queued.insert(text).second) page.missing.push_back(blob.digest);
        }
    page.ready.push_back({r, digest, std::move(parsed)});
}

void Applier::commit_manifests(ManifestPage& page) {
    std::map<std::string, std::uint64_t> sizes;  // asked before the write lock, as above
    for (auto& [r, digest, parsed] : page.ready)
        for (auto& blob : parsed.local_blobs())
            if (page.present.count(blob.digest.str()) && !sizes.count(blob.digest.str()))
                sizes[blob.digest.str()] = blobs_.size(blob.digest).value_or(0);
    storage::MetaStore::Batch batch;
    std::set<std::string> linked;  // links this batch adds
    auto lock = meta_.lock_writes();
    for (auto& [r, digest, parsed] : page.ready) {
        if (!newer_than_here(meta_, StatePart::images, *r)) continue;
        if (r->deleted) {
            auto current = meta_.manifest(r->repo, r->key);
            batch.tombstone_manifest(r->repo, r->key, current && !current->deleted ? &*current : nullptr, r->stamp);
            continue;
        }
        const bool mirrored = is_mirrored(r->repo);
        const auto blobs = parsed.local_blobs();
        const bool complete = mirrored || std::all_of(blobs.begin(), blobs.end(),
                                                      [&](auto& b) { return page.present.count(b.digest.str()) > 0; });
        // Blobs before references; a sparse repository's manifest stands without them.
        if (!complete && !oci::matches_any(rules_.sparse, r->repo)) continue;
        for (auto& blob : blobs) {
            auto text = blob.digest.str();
            if (!page.present.count(text) || linked.count(r->repo + '\0' + text) || meta_.has_link(r->repo, text))
                continue;
            batch.record_link(r->repo, text, r->stamp, false, sizes[text]);
            linked.insert(r->repo + '\0' + text);
        }
        batch.record_manifest(r->repo, *digest, parsed, std::move(r->bytes), r->stamp);
    }
    meta_.commit(batch, storage::MetaStore::Durability::deferred);
}

ApplyResult Applier::apply_manifests(std::vector<StateRecord*>& records, const std::vector<PeerClient*>& sources,
                                     unsigned parallelism, const std::atomic<bool>* stop) {
    ManifestPage page;
    for (auto* r : records) sort_manifest(r, page);
    if (!page.missing.empty()) {
        if (ensure_blobs(page.missing, sources, parallelism, stop) == ApplyResult::unavailable)
            return ApplyResult::unavailable;
        for (auto& digest : page.missing)
            if (blobs_.size(digest)) page.present.insert(digest.str());
    }
    commit_manifests(page);
    for (auto* r : page.single)
        if (apply_manifest(r->repo, r->key, r->stamp, std::nullopt, sources) == ApplyResult::unavailable)
            return ApplyResult::unavailable;
    return ApplyResult::applied;
}

ApplyResult Applier::apply_tags(std::vector<StateRecord*>& records, const std::vector<PeerClient*>& sources) {
    std::vector<StateRecord*> single;  // their manifest is not here (yet)
    {
        storage::MetaStore::Batch batch;
        auto lock = meta_.lock_writes();
        for (auto* r : records) {
            if (!newer_than_here(meta_, StatePart::tags, *r)) continue;
            if (!r->deleted) {
                auto manifest = meta_.stamp_of(StatePart::images, r->repo, r->digest);
                if (!manifest || manifest->second) {
                    single.push_back(r);
                    continue;
                }
            }
            batch.record_tag(r->repo, r->key, r->deleted ? "" : r->digest, r->stamp);
        }
        meta_.commit(batch, storage::MetaStore::Durability::deferred);
    }
    for (auto* r : single)
        if (apply({Event::Type::tag, r->repo, r->digest, r->key, r->stamp}, sources) == ApplyResult::unavailable)
            return ApplyResult::unavailable;
    return ApplyResult::applied;
}

}  // namespace berth::replication
