#pragma once
// Upload sessions: which exist, who is appending, and where their bytes are.
// Sessions survive a restart through their upload record and scratch file; the
// hash state is rebuilt from the file the first time such a session is touched.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "berth/oci/digest.hpp"
#include "berth/storage/upload_appender.hpp"
#include "berth/storage/upload_files.hpp"

namespace berth::storage {
class BlobStore;
class MetaStore;
}  // namespace berth::storage

namespace berth::registry {

// A session: its file (storage's) and what the registry decides about it.
struct UploadState : storage::UploadFile {
    std::string repo;
    std::string client;  // who opened it, for the per-client limit
    oci::DigestAlgorithm algorithm = oci::DigestAlgorithm::sha256;
    std::uint64_t last_active_ms = 0;
    bool busy = false;
    bool cancelled = false;  // ended by a DELETE while held: its holder removes the file
    // A session opens in memory alone (a POST is planned on an I/O thread): its file is made by
    // its first append, its record written once an append to it has been acknowledged.
    bool has_file = false;
    std::atomic<bool> recorded = false;  // set by an acknowledged append while a PUT may finish it
};

class UploadTable {
public:
    using Now = std::function<std::uint64_t()>;

    struct Limits {
        std::size_t sessions, sessions_per_client;
        std::uint64_t min_free_bytes;
    };
    UploadTable(storage::BlobStore& blobs, storage::MetaStore& meta, std::string replica_id, Limits limits, Now now);

    std::shared_ptr<UploadState> create(const std::string& repo, oci::DigestAlgorithm algorithm,
                                        const std::string& client);
    // Throws 507 when taking `incoming` more bytes would leave too little free.
    void require_space(std::uint64_t incoming) const;
    // Exclusive hold on a session of repo, its file made and open (without make_file: open if
    // made, else left to make_file() once there are bytes to store); throws BLOB_UPLOAD_UNKNOWN
    // or 416 when busy. Without may_block, WouldBlock instead of making the file or rebuilding
    // the digest state from every byte of it.
    std::shared_ptr<UploadState> acquire(const std::string& repo, const std::string& id, bool make_file = true,
                                         bool may_block = true);
    // Makes the file of a session acquired without it, and opens it. May block: off the I/O threads.
    void make_file(UploadState& state);
    // Records the session (once) so that it survives a restart; false when it is gone.
    bool keep(const std::string& repo, const std::string& id);
    void release(const std::shared_ptr<UploadState>& state);
    // Ends a session and drops its record, held or not: a DELETE wins over a request still
    // appending (a stalled PATCH), whose file goes when that request lets go.
    void cancel(const std::string& repo, const std::string& id);
    // Ends the sessions nobody holds that were idle since before cutoff_ms; returns how many.
    std::size_t purge_idle(std::uint64_t cutoff_ms);
    // Forgets a held session and deletes its file; its record goes in the caller's batch.
    void erase(const std::shared_ptr<UploadState>& state);
    std::uint64_t offset(const std::string& repo, const std::string& id, bool may_block = true);
    std::uint64_t now() const { return now_(); }
    storage::UploadWriters& writers() { return writers_; }
    storage::UploadFiles& files() { return files_; }
    std::size_t size() {
        std::lock_guard lock(mutex_);
        return sessions_.size();
    }

private:
    std::shared_ptr<UploadState> find_locked(const std::string& repo, const std::string& id);
    // Drops a session and its record (not its file, which is gone).
    void forget(const std::shared_ptr<UploadState>& state);
    // Removes the records of the sessions among these that have one.
    void remove_records(const std::vector<std::shared_ptr<UploadState>>& states);

    storage::BlobStore& blobs_;
    storage::UploadFiles files_;
    storage::MetaStore& meta_;
    std::string replica_id_;
    Limits limits_;
    Now now_;
    std::mutex mutex_;
    std::unordered_map<std::string, std::shared_ptr<UploadState>> sessions_;
    storage::UploadWriters writers_;
};

// Lets go of a session acquired from the table at the end of a scope.
class HeldUpload {
public:
    HeldUpload(UploadTable& table, std::shared_ptr<UploadState> state) : table_(table), state_(std::move(state)) {}
    ~HeldUpload() { table_.release(state_); }
    HeldUpload(const HeldUpload&) = delete;
    HeldUpload& operator=(const HeldUpload&) = delete;

private:
    UploadTable& table_;
    std::shared_ptr<UploadState> state_;
};

}  // namespace berth::registry
