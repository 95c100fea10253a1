#include "applier.hpp"

#include <algorithm>
#include <thread>

#include "berth/oci/error.hpp"
#include "berth/oci/manifest.hpp"
#include "berth/oci/names.hpp"
#include "berth/replication/protocol.hpp"
#include "berth/storage/blob_store.hpp"
#include "berth/storage/hybrid_clock.hpp"
#include "berth/storage/meta_store.hpp"

namespace berth::replication {

using storage::Event;

namespace {

// A failure to reach one source leaves the answer open; only when every
// source said "not here" is the content gone.
struct Outcome {
    bool reached_all = true;
    bool absent = false;  // a source answered "not here" (no source at all proves nothing)
    void failed() { reached_all = false; }
    ApplyResult missing() const { return reached_all ? ApplyResult::gone : ApplyResult::unavailable; }
};

bool well_formed(const Event& event) {
    const bool tagged = event.type == Event::Type::tag || event.type == Event::Type::tag_deleted;
    if (tagged && event.tag.empty()) return false;
    if (event.type != Event::Type::tag_deleted && event.digest.empty()) return false;
    return well_named(event.repo, event.stamp, event.tag, event.digest);
}

}  // namespace

bool well_named(const std::string& repo, const storage::Stamp& stamp, const std::string& tag,
                const std::string& digest) {
    return oci::valid_repository_name(repo) && protocol::valid_replica_id(stamp.replica) &&
           (tag.empty() || oci::valid_tag(tag)) && (digest.empty() || oci::Digest::parse(digest));
}

Applier::Applier(storage::BlobStore& blobs, storage::MetaStore& meta, storage::HybridClock& clock, ContentRules rules)
    : blobs_(blobs), meta_(meta), clock_(clock), rules_(std::move(rules)) {}

ApplyResult Applier::ensure_blob(const oci::Digest& digest, const std::vector<PeerClient*>& sources) {
    if (blobs_.touch(digest)) return ApplyResult::skipped;  // renewed: garbage collection leaves it to be linked
    {
        std::unique_lock lock(fetching_mutex_);
        fetched_.wait(lock, [&] { return !fetching_.count(digest.str()); });
        if (blobs_.touch(digest)) return ApplyResult::skipped;
        fetching_.insert(digest.str());
    }
    struct Done {
        Applier& self;
        std::string key;
        ~Done() {
            std::lock_guard lock(self.fetching_mutex_);
            self.fetching_.erase(key);
            self.fetched_.notify_all();
        }
    } done{*this, digest.str()};
    Outcome outcome;
    for (auto* source : sources) {
        try {
            auto writer = blobs_.write(digest.algorithm());
            int status = source->download(protocol::blob_target(digest.str()), writer);
            if (status == 200 && writer.digest() == digest) {
                bytes_fetched_ += writer.size();
                writer.commit(digest);
                return ApplyResult::applied;
            }
            if (status != 404) outcome.failed();  // a corrupt or refused copy is not proof of absence
        } catch (const std::exception&) {
            outcome.failed();
        }
    }
    return outcome.missing();
}

ApplyResult Applier::ensure_blobs(const std::vector<oci::Digest>& digests, const std::vector<PeerClient*>& sources,
                                  unsigned parallelism, const std::atomic<bool>* stop) {
    std::vector<oci::Digest> missing;
    for (auto& digest : digests)
        if (!blobs_.touch(digest)) missing.push_back(digest);  // renewed: see ensure_blob
    std::atomic<std::size_t> next{0};
    std::atomic<bool> unavailable{false}, gone{false};
    auto work = [&] {
        for (std::size_t n; !(stop && *stop) && (n = next++) < missing.size();) {
            ApplyResult result = ApplyResult::unavailable;
            try {
                result = ensure_blob(missing[n], sources);
            } catch (const std::exception&) {
                // The store failed (a bucket away): tried again later, and on a helper thread an
                // escaping exception would end the process.
            }
            if (result == ApplyResult::unavailable) unavailable = true;
            if (result == ApplyResult::gone) gone = true;
        }
    };
    std::vector<std::thread> helpers;
    const auto threads = std::min<std::size_t>(std::max(1u, parallelism), missing.size());
    for (std::size_t i = 1; i < threads; ++i) helpers.emplace_back(work);
    work();  // this thread takes its share: one missing blob needs no other
    for (auto& helper : helpers) helper.join();
    if (unavailable || (stop && *stop)) return ApplyResult::unavailable;
    if (gone) return ApplyResult::gone;
    return missing.empty() ? ApplyResult::skipped : ApplyResult::applied;
}

ApplyResult Applier::apply(const Event& event, const std::vector<PeerClient*>& sources,
                           std::optional<ManifestContent> content) {
    if (!well_formed(event)) return ApplyResult::gone;
    clock_.observe(event.stamp.clock);
    switch (event.type) {
        case Event::Type::link:
        case Event::Type::unlink: return apply_link(event, sources);
        case Event::Type::manifest: {
            auto result =
                apply_manifest(event.repo, event.digest, event.stamp, std::move(content), sources, 0, event.principal);
            if (result == ApplyResult::skipped || result == ApplyResult::vanished) keep_overtaken_push(event);
            return result == ApplyResult::vanished ? ApplyResult::gone : result;
        }
        case Event::Type::tag: return apply_tag(event, sources);
        case Event::Type::manifest_deleted:
        case Event::Type::tag_deleted: return apply_deletion(event);
    }
    return ApplyResult::skipped;
}

ApplyResult Applier::apply_link(const Event& event, const std::vector<PeerClient*>& sources) {
    auto newer_here = [&] {
        auto local = meta_.link(event.repo, event.digest);
        return local && local->stamp >= event.stamp;
    };
    if (newer_here()) return ApplyResult::skipped;
    const bool deleted = event.type == Event::Type::unlink;
    if (!deleted) {
        auto digest = oci::Digest::parse(event.digest);
        if (!digest) return ApplyResult::gone;
        auto result = ensure_blob(*digest, sources);
        if (result == ApplyResult::gone || result == ApplyResult::unavailable) return result;
    }
    // What the blob weighs in its namespace's usage (an unlink takes what was counted).
    std::uint64_t size = 0;
    if (!deleted)
        if (auto digest = oci::Digest::parse(event.digest)) size = blobs_.size(*digest).value_or(0);
    auto lock = meta_.lock_writes();
    if (newer_here()) return ApplyResult::skipped;
    storage::MetaStore::Batch batch;
    batch.record_link(event.repo, event.digest, event.stamp, deleted, size);
    meta_.commit(batch, storage::MetaStore::Durability::deferred);
    return ApplyResult::applied;
}

ApplyResult Applier::apply_manifest(const std::string& repo, const std::string& digest_text,
                                    const storage::Stamp& stamp, std::optional<ManifestContent> content,
                                    const std::vector<PeerClient*>& sources, int depth, const std::string& principal) {
    auto newer_here = [&] {
        auto record = meta_.manifest(repo, digest_text);
        return record && record->stamp >= stamp;
    };
    auto local = meta_.manifest(repo, digest_text);  // newer_here(), and kept for its bytes
    if (local && local->stamp >= stamp) return ApplyResult::skipped;
    auto digest = oci::Digest::parse(digest_text);
    if (!digest || depth > 8 || !well_named(repo, stamp, {}, digest_text)) return ApplyResult::gone;

    // The same bytes already here under an older push are this push's content: no source need have it.
    if (!content && local && !local->deleted) content = ManifestContent{local->media_type, std::move(local->bytes)};
    Outcome outcome;
    for (std::size_t i = 0; !content && i < sources.size(); ++i) {
        try {
            auto response = sources[i]->request("GET", protocol::manifest_target(repo, digest_text));
            if (response.status == 200 && oci::Digest::of(digest->algorithm(), response.body) == *digest)
                content = ManifestContent{response.header("content-type"), std::move(response.body)};
            else if (response.status == 404) outcome.absent = true;
            else outcome.failed();
        } catch (const std::exception&) {
            outcome.failed();
        }
    }
    if (!content) return outcome.reached_all && outcome.absent ? ApplyResult::vanished : outcome.missing();
    if (oci::Digest::of(digest->algorithm(), content->bytes) != *digest) return ApplyResult::gone;

    oci::ParsedManifest parsed;
    try {
        parsed = oci::parse_manifest(content->bytes, content->media_type);
    } catch (const oci::Error&) {
        return ApplyResult::gone;  // nothing valid to store under this digest
    }

    // Blobs before references: everything it points at is here before it is.
    const auto blobs = parsed.local_blobs();
    std::vector<oci::Digest> digests;
    for (auto& blob : blobs) digests.push_back(blob.digest);
    constexpr unsigned parallel_fetches = 4;
    const bool mirrored = is_mirrored(repo);
    // A sparse repository's manifest stands without what no replica holds.
    const bool sparse = oci::matches_any(rules_.sparse, repo);
    auto fatal = [sparse](ApplyResult result) {
        const bool gone = result == ApplyResult::gone || result == ApplyResult::vanished;
        return result == ApplyResult::unavailable || (gone && !sparse);
    };
    if (auto result = mirrored ? ApplyResult::skipped : ensure_blobs(digests, sources, parallel_fetches); fatal(result))
        return result;
    for (auto& child : parsed.manifests) {
        auto local = meta_.manifest(repo, child.digest.str());
        if (local && !local->deleted) continue;
        auto result = apply_manifest(repo, child.digest.str(), stamp, std::nullopt, sources, depth + 1, principal);
        // A child deleted everywhere leaves its index standing where it was pushed: not this index's delete.
        if (fatal(result)) return result == ApplyResult::vanished ? ApplyResult::gone : result;
    }

    // Sizes first: a store in a bucket answers them over the network, never under the write lock.
    std::vector<std::optional<std::uint64_t>> sizes;
    for (auto& blob : blobs) sizes.push_back(blobs_.size(blob.digest));
    auto lock = meta_.lock_writes();
    if (newer_here()) return ApplyResult::skipped;
    storage::MetaStore::Batch batch({}, principal);
    for (std::size_t i = 0; i < blobs.size(); ++i)
        if (sizes[i] && !meta_.has_link(repo, blobs[i].digest.str()))
            batch.record_link(repo, blobs[i].digest.str(), stamp, false, *sizes[i]);
    batch.record_manifest(repo, *digest, parsed, std::move(content->bytes), stamp);
    meta_.commit(batch, storage::MetaStore::Durability::deferred);
    return ApplyResult::applied;
}

ApplyResult Applier::apply_tag(const Event& event, const std::vector<PeerClient*>& sources) {
    auto newer_here = [&] {
        auto local = meta_.tag(event.repo, event.tag);
        return local && local->stamp >= event.stamp;
    };
    if (newer_here()) {
        keep_overtaken_tag(event);
        return ApplyResult::skipped;
    }
    auto manifest = meta_.manifest(event.repo, event.digest);
    if (!manifest || manifest->deleted) {
        auto result = apply_manifest(event.repo, event.digest, event.stamp, std::nullopt, sources, 0, event.principal);
        if (result == ApplyResult::vanished) {
            keep_overtaken_tag(event);  // the tag as it stands here waits for the deletes that followed
            return ApplyResult::gone;
        }
        if (result == ApplyResult::gone || result == ApplyResult::unavailable) return result;
        manifest = meta_.manifest(event.repo, event.digest);
        if (!manifest || manifest->deleted) {  // deleted here later than this tag (or with its push)
            keep_overtaken_tag(event);
            return ApplyResult::skipped;
        }
    }
    auto lock = meta_.lock_writes();
    if (newer_here()) {
        lock.unlock();
        keep_overtaken_tag(event);
        return ApplyResult::skipped;
    }
    storage::MetaStore::Batch batch(event.cause, event.principal);
    // Logged again if it was logged as overtaken before (its manifest deleted here, then pushed
    // again): the same id twice, which receivers drop, rather than another move to the same digest
    // at or below that clock never told.
    batch.record_tag(event.repo, event.tag, event.digest, event.stamp);
    meta_.commit(batch, storage::MetaStore::Durability::deferred);
    return ApplyResult::applied;
}

// A tag move that a newer one overtook on its way here, or whose manifest every replica had deleted
// by the time this one asked, was still acknowledged where it was made: this replica's log keeps it
// (once), so whichever replica tells receivers of changes tells it.
void Applier::keep_overtaken_tag(const Event& event) {
    auto lock = meta_.lock_writes();
    auto local = meta_.tag(event.repo, event.tag);
    if (local && local->stamp == event.stamp) return;  // this very move is here
    if (auto named = meta_.tag_named_at(event.repo, event.tag, event.digest); named && *named >= event.stamp.clock)
        return;  // logged here already, or named again since
    storage::MetaStore::Batch batch(event.cause, event.principal);
    batch.record_overtaken_tag(event.repo, event.tag, event.digest, event.stamp);
    meta_.commit(batch, storage::MetaStore::Durability::deferred);
}

// The same for a push whose delete reached this replica first, or whose manifest every replica had
// deleted by the time this one asked: logged against a tombstone (the push's own when nothing of it
// is here), which the delete, on its way, overwrites.
void Applier::keep_overtaken_push(const Event& event) {
    auto lock = meta_.lock_writes();
    auto local = meta_.manifest(event.repo, event.digest);
    if (local && (!local->deleted || local->pushed >= event.stamp.clock)) return;  // here, or logged here
    // At least the push's stamp: every replica's 404 means a delete newer than it is on its way, and a
    // replay of the push must not bring back bytes that turn up again under it.
    storage::ManifestRecord tombstone = local ? *local : storage::ManifestRecord{};
    tombstone.stamp = std::max(tombstone.stamp, event.stamp);
    tombstone.deleted = true;
    storage::MetaStore::Batch batch(event.cause, event.principal);
    batch.record_overtaken_manifest(event.repo, event.digest, tombstone, event.stamp);
    meta_.commit(batch, storage::MetaStore::Durability::deferred);
}

ApplyResult Applier::apply_deletion(const Event& event) {
    auto lock = meta_.lock_writes();
    storage::MetaStore::Batch batch(event.cause, event.principal);
    if (event.type == Event::Type::tag_deleted) {
        auto local = meta_.tag(event.repo, event.tag);
        if (local && local->stamp >= event.stamp) return ApplyResult::skipped;
        batch.record_tag(event.repo, event.tag, "", event.stamp);
    } else {
        auto local = meta_.manifest(event.repo, event.digest);
        if (local && local->stamp >= event.stamp) return ApplyResult::skipped;
        batch.tombstone_manifest(event.repo, event.digest, local ? &*local : nullptr, event.stamp);
    }
    meta_.commit(batch, storage::MetaStore::Durability::deferred);
    return ApplyResult::applied;
}

}  // namespace berth::replication
