#include "upload_table.hpp"

#include <algorithm>
#include <array>
#include <thread>

#include "berth/oci/error.hpp"
#include "berth/oci/names.hpp"
#include "berth/registry/upload_id.hpp"
#include "berth/registry/would_block.hpp"
#include "berth/storage/blob_store.hpp"
#include "berth/storage/meta_store.hpp"

namespace berth::registry {
namespace {

using oci::Error;
using oci::ErrorCode;

}  // namespace

UploadTable::UploadTable(storage::BlobStore& blobs, storage::MetaStore& meta, std::string replica_id, Limits limits,
                         Now now)
    : blobs_(blobs), files_(blobs), meta_(meta), replica_id_(std::move(replica_id)), limits_(limits),
      now_(std::move(now)) {
    storage::MetaStore::Batch orphans;
    bool orphaned = false;
    for (auto& [id, record] : meta_.uploads()) {
        // A crash between a finished upload's rename and its index commit
        // leaves the record without its file: the session is over.
        if (!files_.exists(id)) {
            orphans.remove_upload(id);
            orphaned = true;
            continue;
        }
        auto state = std::make_shared<UploadState>();
        state->id = id;
        state->repo = record.repository;
        state->algorithm = oci::parse_algorithm(record.algorithm).value_or(oci::DigestAlgorithm::sha256);
        state->last_active_ms = now_();
        state->has_file = true;
        state->recorded = true;
        sessions_.emplace(id, std::move(state));
    }
    if (orphaned) meta_.commit(orphans, storage::MetaStore::Durability::none);
    // Nothing is in flight at start: an upload file no session owns (its
    // record lost in a crash) is only litter.
    files_.sweep([&](const std::string& id) { return sessions_.count(id) > 0; });
}

void UploadTable::require_space(std::uint64_t incoming) const {
    if (!limits_.min_free_bytes) return;
    auto free = blobs_.free_bytes();
    if (free < limits_.min_free_bytes || free - limits_.min_free_bytes < incoming)
        throw Error(ErrorCode::insufficient_storage, "insufficient storage: the registry's disk is nearly full");
}

std::shared_ptr<UploadState> UploadTable::create(const std::string& repo, oci::DigestAlgorithm algorithm,
                                                 const std::string& client) {
    require_space(0);
    auto state = std::make_shared<UploadState>();
    state->id = new_upload_id(replica_id_);
    state->repo = repo;
    state->client = client;
    state->algorithm = algorithm;
    state->hasher.emplace(algorithm);
    state->last_active_ms = now_();
    {
        std::lock_guard lock(mutex_);
        if (sessions_.size() >= limits_.sessions)
            throw Error(ErrorCode::too_many_requests, "too many upload sessions in progress");
        if (!client.empty() && limits_.sessions_per_client) {
            std::size_t mine = 0;
            for (auto& [id, session] : sessions_) mine += session->client == client;
            if (mine >= limits_.sessions_per_client)
                throw Error(ErrorCode::too_many_requests, "too many upload sessions open by this client");
        }
        sessions_.emplace(state->id, state);
    }
    return state;
}

std::shared_ptr<UploadState> UploadTable::find_locked(const std::string& repo, const std::string& id) {
    if (!oci::valid_upload_id(id)) throw Error(ErrorCode::blob_upload_unknown, "upload unknown");
    auto it = sessions_.find(id);
    if (it == sessions_.end() || it->second->repo != repo)
        throw Error(ErrorCode::blob_upload_unknown, "upload unknown");
    return it->second;
}

std::shared_ptr<UploadState> UploadTable::acquire(const std::string& repo, const std::string& id, bool make_file,
                                                  bool may_block) {
    std::shared_ptr<UploadState> state;
    {
        std::lock_guard lock(mutex_);
        state = find_locked(repo, id);
        if (state->busy) throw Error(ErrorCode::upload_range_invalid, "upload is in use by another request");
        // Decided here, under the lock: a holder may have dropped the digest state (a failed write).
        if (!may_block && (state->has_file ? !state->hasher : make_file)) throw WouldBlock{};
        state->busy = true;
    }
    try {
        if (!state->has_file && !state->hasher) {
            // A failed first write dropped the digest state of bytes that never reached a file: none.
            state->hasher.emplace(state->algorithm);
            state->offset = 0;
        }
        if (!state->has_file && make_file) {
            this->make_file(*state);
        } else if (state->has_file && !files_.open(*state, state->algorithm)) {
            // Gone under a session that outlived it (see the constructor): forget it.
            forget(state);
            throw Error(ErrorCode::blob_upload_unknown, "upload unknown (its file is gone)");
        }
    } catch (...) {
        release(state);
        throw;
    }
    return state;
}

void UploadTable::make_file(UploadState& state) {
    files_.make(state);
    state.has_file = true;
}

void UploadTable::forget(const std::shared_ptr<UploadState>& state) {
    remove_records({state});
    std::lock_guard lock(mutex_);
    sessions_.erase(state->id);
}

bool UploadTable::keep(const std::string& repo, const std::string& id) {
    std::shared_ptr<UploadState> state;
    {
        std::lock_guard lock(mutex_);
        auto it = sessions_.find(id);
        if (it == sessions_.end() || it->second->repo != repo) return false;
        state = it->second;
        if (state->recorded) return true;
        state->recorded = true;
    }
    storage::MetaStore::Batch batch;
    batch.put_upload(state->id, {state->repo, std::string(oci::algorithm_name(state->algorithm))});
    // A crash may forget the session (its client starts the upload again): not worth an fsync.
    meta_.commit(batch, storage::MetaStore::Durability::none);
    // Ended meanwhile (a PUT, a DELETE, a purge) by one that saw no record to remove: remove it.
    bool ended;
    {
        std::lock_guard lock(mutex_);
        auto it = sessions_.find(id);
        ended = it == sessions_.end() || it->second != state;
    }
    if (ended) remove_records({state});
    return true;
}

void UploadTable::remove_records(const std::vector<std::shared_ptr<UploadState>>& states) {
    storage::MetaStore::Batch batch;
    bool any = false;
    for (auto& state : states)
        if (state->recorded) {
            batch.remove_upload(state->id);
            any = true;
        }
    if (any) meta_.commit(batch, storage::MetaStore::Durability::none);
}

void UploadTable::release(const std::shared_ptr<UploadState>& state) {
    files_.close(*state);
    bool cancelled;
    {
        std::lock_guard lock(mutex_);
        state->last_active_ms = now_();
        state->busy = false;
        cancelled = state->cancelled;
    }
    if (cancelled) files_.remove(*state);
}

void UploadTable::cancel(const std::string& repo, const std::string& id) {
    std::shared_ptr<UploadState> state;
    bool held;
    {
        std::lock_guard lock(mutex_);
        state = find_locked(repo, id);
        sessions_.erase(id);  // from here on nobody else can take it up
        held = state->busy;
        state->cancelled = held;
    }
    if (!held) files_.remove(id);
    remove_records({state});
}

std::size_t UploadTable::purge_idle(std::uint64_t cutoff_ms) {
    std::vector<std::shared_ptr<UploadState>> idle;
    {
        std::lock_guard lock(mutex_);
        for (auto it = sessions_.begin(); it != sessions_.end();) {
            if (!it->second->busy && it->second->last_active_ms < cutoff_ms) {
                idle.push_back(it->second);
                it = sessions_.erase(it);
            } else {
                ++it;
            }
        }
    }
    for (auto& state : idle) files_.remove(state->id);
    remove_records(idle);
    return idle.size();
}

void UploadTable::erase(const std::shared_ptr<UploadState>& state) {
    files_.remove(*state);
    std::lock_guard lock(mutex_);
    sessions_.erase(state->id);
}

std::uint64_t UploadTable::offset(const std::string& repo, const std::string& id, bool may_block) {
    auto state = acquire(repo, id, false, may_block);
    auto offset = state->offset;
    release(state);
    return offset;
}

}  // namespace berth::registry
