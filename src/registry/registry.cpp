#include "berth/registry/registry.hpp"

#include <nlohmann/json.hpp>

#include "berth/oci/error.hpp"
#include "berth/oci/names.hpp"
#include "berth/storage/crash_points.hpp"
#include "berth/storage/blob_store.hpp"
#include "berth/storage/meta_store.hpp"
#include "berth/storage/events.hpp"
#include "policy_memory.hpp"
#include "upload_table.hpp"
#include "validate.hpp"

namespace berth::registry {

using oci::Error;
using oci::ErrorCode;

Registry::Registry(Options options, storage::BlobStore& blobs, storage::MetaStore& meta, storage::HybridClock& clock,
                   Collaborators with, storage::HybridClock::WallClock wall)
    : options_(std::move(options)), blobs_(blobs), meta_(meta), clock_(clock),
      uploads_(std::make_unique<UploadTable>(
          blobs, meta, options_.replica_id,
          UploadTable::Limits{options_.max_uploads, options_.max_uploads_per_client, options_.min_free_bytes},
          std::move(wall))),
      peers_(with.peers), upstreams_(with.upstreams), pulls_(with.pulls), signatures_(with.signatures),
      policy_memory_(std::make_unique<PolicyMemory>()) {}

// A fetch still running writes through this registry (FetchIntake): it ends first.
Registry::~Registry() {
    if (upstreams_) upstreams_->finish_fetches();
}

std::string Registry::blob_party() const { return blobs_.party(); }

Contents Registry::contents() const {
    return Contents({options_, blobs_, meta_, pulls_, upstreams_, signatures_, *this});
}

storage::Stamp Registry::stamp() { return {clock_.now(), options_.replica_id}; }

Lookup Registry::find_blob(const std::string& repo, const oci::Digest& digest) {
    auto live = [&] { return meta_.has_link(repo, digest.str()) && blobs_.size(digest); };
    if (live()) return Lookup::here;
    if (!peers_) return Lookup::absent;
    // Read-through when this replica knows nothing of the link, or links a
    // blob it lost (quarantined by scrub); an unlink here must not be undone
    // by a peer that has not seen it yet.
    auto link = meta_.link(repo, digest.str());
    if (link && link->deleted) return Lookup::absent;
    auto found = peers_->fetch_blob(repo, digest);
    return found != Lookup::here || live() ? found : Lookup::absent;
}

bool Registry::has_blob(const std::string& repo, const oci::Digest& digest) {
    return find_blob(repo, digest) == Lookup::here;
}

void Registry::commit_replicated(std::unique_lock<std::mutex>& lock, storage::MetaStore::Batch& batch) {
    meta_.commit(batch, storage::MetaStore::Durability::deferred);
    lock.unlock();  // visible here; the fsync and waiting for peers need no lock
    meta_.sync();
    if (peers_) peers_->replicate(batch.events());
}

BlobInfo Registry::stat_blob(const std::string& repo, const std::string& digest_text, Asker asker) {
    require_name(repo);
    auto digest = oci::Digest::parse_or_throw(digest_text);
    if (upstreams_ && upstreams_->mirrors(repo)) {
        if (auto read = open_mirrored_blob(repo, digest, asker)) return {digest, read->blob.size(), read->cache};
    } else if (has_blob(repo, digest)) {
        if (auto size = blobs_.size(digest)) return {digest, *size};
    }
    throw Error(ErrorCode::blob_unknown, "blob unknown to registry", digest.str());
}

std::optional<std::string> Registry::blob_redirect(const std::string& repo, const std::string& digest_text) {
    require_name(repo);
    const auto digest = oci::Digest::parse_or_throw(digest_text);
    // A mirror's blob may still be on its way into the store (its fetch streams to the reader
    // first): served here, never sent to an object that may not exist yet.
    if (upstreams_ && upstreams_->mirrors(repo)) return std::nullopt;
    auto url = blobs_.redirect(digest);
    if (!url) return std::nullopt;
    if (!has_blob(repo, digest)) throw Error(ErrorCode::blob_unknown, "blob unknown to registry", digest.str());
    return url;
}

BlobRead Registry::open_blob(const std::string& repo, const std::string& digest_text, Asker asker) {
    require_name(repo);
    auto digest = oci::Digest::parse_or_throw(digest_text);
    if (upstreams_ && upstreams_->mirrors(repo)) {
        if (auto read = open_mirrored_blob(repo, digest, asker)) return std::move(*read);
    } else if (has_blob(repo, digest)) {
        if (auto blob = blobs_.open(digest)) return {std::move(*blob)};
    }
    throw Error(ErrorCode::blob_unknown, "blob unknown to registry", digest.str());
}

void Registry::delete_blob(const std::string& repo, const std::string& digest_text) {
    require_name(repo);
    require_writable(options_);
    auto digest = oci::Digest::parse_or_throw(digest_text);
    if (!options_.deletes_enabled) throw Error(ErrorCode::unsupported, "deletes are disabled");
    auto lock = meta_.lock_writes();
    if (!meta_.has_link(repo, digest.str())) throw Error(ErrorCode::blob_unknown, "blob unknown to registry");
    const auto stamp = this->stamp();
    storage::MetaStore::Batch batch;
    batch.record_link(repo, digest.str(), stamp, true, 0);
    meta_.commit(batch);
}

UploadStatus Registry::start_upload(const std::string& repo, const std::string& algorithm, const std::string& client) {
    require_name(repo);
    require_writable(options_);
    auto alg = oci::DigestAlgorithm::sha256;
    if (!algorithm.empty()) {
        auto parsed = oci::parse_algorithm(algorithm);
        if (!parsed) throw Error(ErrorCode::digest_invalid, "unsupported digest algorithm", algorithm.substr(0, 64));
        alg = *parsed;
    }
    return {uploads_->create(repo, alg, client)->id, 0};
}

MountResult Registry::mount_blob(const std::string& repo, const std::string& digest_text, const std::string& from,
                                 const std::string& client) {
    require_name(repo);
    require_writable(options_);
    auto digest = oci::Digest::parse_or_throw(digest_text);
    // Without `from` we do not mount: knowing a digest must not grant access to
    // content in repositories the client may not read.
    if (!from.empty()) {
        require_name(from);
        if (has_blob(from, digest) && link_blob(repo, digest)) return {digest, {}};
    }
    return {std::nullopt, uploads_->create(repo, digest.algorithm(), client)->id};
}

bool Registry::link_blob(const std::string& repo, const oci::Digest& digest) {
    require_name(repo);
    require_writable(options_);
    if (has_blob(repo, digest)) return true;
    // Made young again first, so garbage collection cannot take it before the link is written.
    auto size = blobs_.touch(digest) ? blobs_.size(digest) : std::nullopt;
    if (!size) return false;
    auto lock = meta_.lock_writes();
    const auto stamp = this->stamp();
    storage::MetaStore::Batch batch;
    batch.record_link(repo, digest.str(), stamp, false, *size);
    enforce_quotas(batch);
    meta_.commit(batch);
    return true;
}

void Registry::admit(const std::string& repo, const oci::Digest& digest, std::uint64_t size) {
    if (!has_quota(repo) || meta_.has_link(repo, digest.str())) return;
    storage::MetaStore::Batch batch;
    batch.record_link(repo, digest.str(), stamp(), false, size);
    enforce_quotas(batch);
}

void Registry::link_fetched(const std::vector<std::string>& repos, const oci::Digest& digest) {
    const auto size = blobs_.size(digest);
    if (!size) return;
    for (auto& repo : repos) {
        auto lock = meta_.lock_writes();
        if (meta_.has_link(repo, digest.str())) continue;
        storage::MetaStore::Batch batch;
        batch.record_link(repo, digest.str(), stamp(), false, *size);
        try {
            enforce_quotas(batch);  // again: others may have filled the namespace meanwhile
        } catch (const Error&) {
            continue;  // unlinked, for garbage collection; the next read asks again
        }
        meta_.commit(batch, storage::MetaStore::Durability::deferred);
    }
    meta_.sync();
}

UploadStatus Registry::upload_status(const std::string& repo, const std::string& id, bool may_block) {
    require_name(repo);
    return {id, uploads_->offset(repo, id, may_block)};
}

std::unique_ptr<storage::UploadAppender> Registry::append(const std::string& repo, const std::string& id,
                                                          std::optional<std::uint64_t> start, bool may_block) {
    require_name(repo);
    // A new session's file is made by the appender where its first bytes are stored, not here:
    // an append planned on an I/O thread starts reading its body at once.
    auto state = uploads_->acquire(repo, id, false, may_block);
    storage::UploadPolicy policy{
        options_.max_blob_bytes,
        [uploads = uploads_.get()](std::uint64_t incoming) { uploads->require_space(incoming); },
        [uploads = uploads_.get(), state] { uploads->release(state); },
        [uploads = uploads_.get(), state] { uploads->make_file(*state); }};
    // Checked before an appender exists: letting one go finishes it, which may make the file,
    // and this may run on an I/O thread.
    if (start && *start != state->offset) {
        const auto offset = state->offset;
        uploads_->release(state);
        throw Error(ErrorCode::upload_range_invalid, "chunk does not start at the end of the upload",
                    "expected offset " + std::to_string(offset));
    }
    return std::make_unique<storage::UploadAppender>(state, uploads_->writers(), std::move(policy));
}

oci::Digest Registry::finish_upload(const std::string& repo, const std::string& id, const std::string& digest_text) {
    require_name(repo);
    auto expected = oci::Digest::parse_or_throw(digest_text);
    auto state = uploads_->acquire(repo, id);
    HeldUpload hold(*uploads_, state);
    auto& files = uploads_->files();
    auto actual =
        state->algorithm == expected.algorithm() ? state->hasher->peek() : files.digest(*state, expected.algorithm());
    const bool recorded = state->recorded;  // a late keep() removes what it writes itself
    // A refused or failed commit ends the session with its bytes.
    auto end_session = [&] {
        uploads_->erase(state);
        if (!recorded) return;
        storage::MetaStore::Batch end;
        end.remove_upload(id);
        meta_.commit(end, storage::MetaStore::Durability::none);
    };
    if (actual != expected) {
        end_session();
        throw Error(ErrorCode::digest_invalid, "content does not match digest",
                    "expected " + expected.str() + ", got " + actual.str());
    }
    storage::crash_point("upload.verified");
    // Under a quota a blob file is made visible only once the quota allowed it,
    // under the write lock; the file's fsync, the slow part, comes first. A blob in
    // a bucket goes up first (never under the lock): refused, it is an object no
    // link names, garbage collection's to take.
    const bool limited = has_quota(repo);
    const bool commit_under_lock = limited && !blobs_.remote();
    // A failed fsync is reported once: the kernel may have dropped the bytes, and a retried
    // PUT's fsync would succeed. So the session ends with it; its client uploads again. A
    // shortage of descriptors or memory touched no byte: the session stays for a retry, if its
    // file is still there to retry with (not once it was renamed into place).
    auto ends_session = [&](const std::system_error& error) {
        const auto code = error.code();
        const bool shortage = code == std::errc::too_many_files_open ||
                              code == std::errc::too_many_files_open_in_system || code == std::errc::not_enough_memory;
        return !shortage || !files.exists(state->id);
    };
    try {
        commit_under_lock ? files.sync(*state) : files.commit(*state, actual);
    } catch (const std::system_error& error) {
        if (ends_session(error)) end_session();
        throw;
    }
    auto lock = meta_.lock_writes();
    const auto stamp = this->stamp();
    storage::MetaStore::Batch batch;
    if (recorded) batch.remove_upload(id);
    batch.record_link(repo, actual.str(), stamp, false, state->offset);
    if (limited) {
        try {
            enforce_quotas(batch);
            if (commit_under_lock) files.commit(*state, actual);
        } catch (const Error&) {
            lock.unlock();
            end_session();  // the refused bytes go with the session
            throw;
        } catch (const std::system_error& error) {
            lock.unlock();
            if (ends_session(error)) end_session();
            throw;
        }
    }
    uploads_->erase(state);
    meta_.commit(batch, storage::MetaStore::Durability::deferred);
    storage::crash_point("upload.committed");
    lock.unlock();
    meta_.sync();  // outside the lock: concurrent uploads share the fsync
    return actual;
}

void Registry::cancel_upload(const std::string& repo, const std::string& id) {
    require_name(repo);
    uploads_->cancel(repo, id);
}

bool Registry::keep_upload(const std::string& repo, const std::string& id) { return uploads_->keep(repo, id); }

std::size_t Registry::uploads_in_progress() const { return uploads_->size(); }
storage::LogStats Registry::change_log() const { return meta_.log_stats(); }

std::size_t Registry::upload_buffer_bytes() const { return uploads_->writers().buffer_bytes(); }

void Registry::drain_uploads() { uploads_->writers().drain(); }

std::size_t Registry::purge_idle_uploads() {
    const auto ttl_ms = static_cast<std::uint64_t>(options_.upload_idle_ttl.count()) * 1000;
    const auto now = uploads_->now();
    return uploads_->purge_idle(now > ttl_ms ? now - ttl_ms : 0);
}

}  // namespace berth::registry
