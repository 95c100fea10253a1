#pragma once
// Consistent backups of a store, taken while it serves, into a content-addressed target
// (layout.hpp's backup tree, docs/backup.md): the index copied from one snapshot, then every
// blob file hard-linked or copied; checked by re-hashing; restored into an empty root.
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace berth::observe {
class MetricsWriter;
}

namespace berth::storage {

class BlobStore;
class MetaStore;

struct BackupProgress {
    std::string stage;  // "index", "blobs", "done"
    std::uint64_t blobs = 0, bytes = 0;
};

struct BackupReport {
    std::string id;
    std::filesystem::path dir;
    bool incremental = false;
    std::uint64_t log_head = 0;
    std::uint64_t blobs = 0, bytes = 0;          // what the backup holds
    std::uint64_t copied = 0, copied_bytes = 0;  // what this run added to the target
    std::uint64_t damaged =
        0;  // store blob files whose bytes no longer match their digest, or linked blobs a bucket lacks
    bool blobs_in_bucket = false;  // the store's blobs are in a bucket: listed and checked, not copied
};

struct BackupError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Takes a backup of meta and blobs into target. Without incremental the target must hold no
// backup yet; with it, blob files the target holds already are not copied again. A damaged
// blob file in the store is left out, counted and logged; the backup still completes. A store
// whose blobs are in a bucket has them listed and checked against the index, not copied.
BackupReport take_backup(const MetaStore& meta, const BlobStore& blobs, const std::filesystem::path& target,
                         bool incremental, const std::function<void(const BackupProgress&)>& progress = {});

// The backups in target, oldest first (complete ones only).
std::vector<std::string> backup_ids(const std::filesystem::path& target);

struct VerifyReport {
    std::uint64_t backups = 0, blobs = 0, bytes = 0;
    std::vector<std::string> damage;  // empty: every backup is whole
};
// Re-hashes every blob file once and checks every backup's description, index files and blob list.
VerifyReport verify_backups(const std::filesystem::path& target,
                            const std::function<void(const BackupProgress&)>& progress = {});

// Keeps the newest `keep` backups, removes the others and the blob files no remaining backup lists.
struct PruneReport {
    std::vector<std::string> removed;
    std::uint64_t blobs_removed = 0, bytes_removed = 0;
};
PruneReport prune_backups(const std::filesystem::path& target, std::size_t keep);

struct RestoreReport {
    std::string id;
    std::uint64_t blobs = 0, bytes = 0, linked = 0;
    bool blobs_in_bucket = false;    // nothing placed: the replica finds them in the bucket it is started on
    std::vector<std::string> peers;  // the replicas the backed-up one was configured with
};
// What a backup says of itself, for the caller to decide before restoring.
std::vector<std::string> backup_peers(const std::filesystem::path& target, const std::string& id);
// Rebuilds root (which must hold no store) from backup `id` of target ("": the newest). The
// index gets a new log epoch, so peers that read the replica's log before start over from it (a
// bootstrap) instead of skipping what it writes under sequence numbers they have read; how far it
// had read their logs stays, and it goes on from there.
RestoreReport restore_backup(const std::filesystem::path& target, const std::string& id,
                             const std::filesystem::path& root,
                             const std::function<void(const BackupProgress&)>& progress = {});

// Backups taken by a running replica (config `backup`): one at a time, on a thread of its own,
// asked for through POST /_berth/v1/backup (its secret is HTTP's, http::ServerOptions) or every
// `interval`; the target is the configuration's, never the request's.
struct BackupOptions {
    std::filesystem::path target;  // empty: no backups from the server
    std::size_t keep = 0;          // after each backup, prune to this many (0: keep all)
    std::chrono::seconds interval{0};
    bool enabled() const { return !target.empty(); }
};

// How the server's backups stand (times: Unix seconds, 0 for never).
struct BackupStatus {
    std::string state = "idle";          // idle, running, succeeded, failed
    std::string id;                      // the last backup taken ("" before the first)
    std::string stage;                   // while running
    std::uint64_t blobs = 0, bytes = 0;  // of the one running, else of the last
    std::uint64_t copied = 0, copied_bytes = 0, damaged = 0;
    std::uint64_t started = 0, finished = 0, last_success = 0;
    std::string error;  // why the last one failed
};

class BackupJob {
public:
    BackupJob(BackupOptions options, const MetaStore& meta, const BlobStore& blobs);
    ~BackupJob();  // waits for a backup under way
    BackupJob(const BackupJob&) = delete;
    BackupJob& operator=(const BackupJob&) = delete;

    const BackupOptions& options() const { return options_; }
    // Starts a backup unless one is under way; false when one is.
    bool start();
    BackupStatus status() const;
    void write_metrics(observe::MetricsWriter& out) const;

private:
    void run();
    BackupOptions options_;
    const MetaStore& meta_;
    const BlobStore& blobs_;
    mutable std::mutex mutex_;
    std::thread thread_;
    bool running_ = false;
    std::string state_ = "idle", error_, stage_;
    BackupReport last_;
    BackupProgress progress_;
    std::uint64_t started_ = 0, finished_ = 0, last_success_ = 0, succeeded_ = 0, failed_ = 0;
};

}  // namespace berth::storage
