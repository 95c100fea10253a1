#pragma once
// The RocksDB index: repositories, manifests, tags, repository→blob links,
// referrers, upload sessions and the append-only change log. Every change goes
// through a Batch that commits atomically and durably together with its log events.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "berth/oci/digest.hpp"
#include "berth/oci/manifest.hpp"
#include "berth/storage/events.hpp"
#include "berth/storage/records.hpp"

namespace berth::storage {

struct LogEntry {
    std::uint64_t sequence = 0;
    std::string event;  // JSON
};

// The change log as it stands, for its metrics.
struct LogStats {
    std::uint64_t entries = 0;
    std::uint64_t bytes = 0;      // RocksDB's estimate, files and memtables
    std::uint64_t oldest_ms = 0;  // physical time of the oldest entry's stamp; 0: empty
};

class MetaStore {
public:
    enum class Mode { read_write, read_only };
    // read_only opens beside a running server (for `berth gc --dry-run`).
    explicit MetaStore(const std::filesystem::path& dir, Mode mode = Mode::read_write);
    ~MetaStore();
    MetaStore(const MetaStore&) = delete;
    MetaStore& operator=(const MetaStore&) = delete;

    class Batch {
    public:
        Batch();
        ~Batch();
        Batch(Batch&&) noexcept;
        // The replicated changes, the one place each is written: its records,
        // its repository, and its change-log event (the log sequence is
        // assigned at commit, in commit order). A push, the applier and
        // garbage collection all write through these.
        //
        // A live manifest, with its referrer entry when it has a subject.
        void record_manifest(const std::string& repo, const oci::Digest& digest, const oci::ParsedManifest& parsed,
                             std::string bytes, const Stamp& stamp);
        // A manifest's tombstone, in place of `current` (whose referrer entry goes) if there is one.
        void tombstone_manifest(const std::string& repo, const std::string& digest, const ManifestRecord* current,
                                const Stamp& stamp);
        // A tag; an empty digest is its tombstone.
        void record_tag(const std::string& repo, const std::string& tag, const std::string& digest,
                        const Stamp& stamp);
        // A repository's link to a blob, or its tombstone. size: the blob's
        // bytes, which its namespace's usage counts from its first live link
        // there on; an unlink takes away what was counted (its size is unused).
        void record_link(const std::string& repo, const std::string& digest, const Stamp& stamp, bool deleted,
                         std::uint64_t size);
        // The events logged so far, for the write quorum.
        const std::vector<Event>& events() const;

        // Upload sessions: not replicated, not logged.
        void put_upload(const std::string& id, const UploadRecord& record);
        void remove_upload(const std::string& id);

    private:
        friend class MetaStore;
        struct Impl;
        std::unique_ptr<Impl> impl_;
    };

    // Atomic, with what the batch does to namespace usage (the `usage` column
    // family, layout.hpp); returns the sequence of the last log event (or the current head).
    // Durability::now fsyncs before returning. Durability::deferred only makes
    // the write visible: the caller calls sync() before acknowledging it, after
    // letting go of its locks, so that concurrent writers share one fsync.
    // Durability::none is for state a crash may lose (upload sessions' records).
    enum class Durability { now, deferred, none };
    std::uint64_t commit(Batch& batch, Durability durability = Durability::now);
    void sync();
    // Held around read-compare-commit of stamped records, so that a write
    // carrying an older stamp can never overwrite a newer one.
    std::unique_lock<std::mutex> lock_writes();

    std::optional<ManifestRecord> manifest(const std::string& repo, const std::string& digest) const;
    std::optional<TagRecord> tag(const std::string& repo, const std::string& tag) const;
    std::optional<LinkRecord> link(const std::string& repo, const std::string& digest) const;
    bool has_link(const std::string& repo, const std::string& digest) const;
    bool has_repository(const std::string& repo) const;

    // Live tags of repo after `after`, in byte order, at most limit.
    std::vector<std::string> tags(const std::string& repo, const std::string& after, std::size_t limit) const;
    // Live tags of repo that point at digest.
    std::vector<std::string> tags_of(const std::string& repo, const std::string& digest) const;
    std::vector<std::string> repositories(const std::string& after, std::size_t limit) const;
    std::vector<std::string> referrers(const std::string& repo, const std::string& subject) const;
    std::vector<std::pair<std::string, UploadRecord>> uploads() const;

    std::vector<LogEntry> read_log(std::uint64_t after, std::size_t limit) const;
    std::uint64_t log_head() const;
    LogStats log_stats() const;

    // Every manifest, tag and link record, tombstones included, as of one
    // consistent moment; returns the log head at that moment.
    struct StateVisitor {
        virtual ~StateVisitor() = default;
        virtual void manifest(const std::string& repo, const std::string& digest, const ManifestRecord& r) = 0;
        virtual void tag(const std::string& repo, const std::string& tag, const TagRecord& r) = 0;
        virtual void link(const std::string& repo, const std::string& digest, const LinkRecord& r) = 0;
    };
    std::uint64_t visit_state(StateVisitor& visitor) const;

    // Namespace usage: the deduplicated bytes of the blobs linked into a
    // namespace's repositories, and how many repositories it holds. Every
    // commit keeps it, whoever writes (pushes, the applier, garbage collection).
    NamespaceUsage usage(const std::string& ns) const;
    // Namespaces holding anything, after `after` in byte order, at most limit.
    std::vector<std::pair<std::string, NamespaceUsage>> usages(const std::string& after, std::size_t limit) const;
    // What committing batch now would do to each namespace it touches. It
    // stays true until the commit while the caller holds lock_writes().
    std::vector<UsageChange> usage_change(const Batch& batch) const;
    // Counts usage from every link and repository once, for a store that an
    // older berth wrote (no-op when it is counted: settings key usage_counted).
    // blob_size: a blob's bytes (0 when it is gone). Call before serving.
    void count_usage(const std::function<std::uint64_t(const std::string& digest)>& blob_size);

    std::optional<std::string> setting(const std::string& key) const;
    void put_setting(const std::string& key, const std::string& value);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace berth::storage
