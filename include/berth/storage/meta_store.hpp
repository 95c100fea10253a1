#pragma once
// The RocksDB index: repositories, manifests, tags, repository→blob links,
// referrers, upload sessions and the append-only change log. Every change goes
// through a Batch that commits atomically and durably together with its log events.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "berth/storage/events.hpp"
#include "berth/storage/records.hpp"

namespace berth::storage {

struct LogEntry {
    std::uint64_t sequence = 0;
    std::string event;  // JSON
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
        void add_repository(const std::string& repo);
        void put_manifest(const std::string& repo, const std::string& digest, const ManifestRecord& record);
        void put_tag(const std::string& repo, const std::string& tag, const TagRecord& record);
        void put_link(const std::string& repo, const std::string& digest, const LinkRecord& record);
        void put_referrer(const std::string& repo, const std::string& subject, const std::string& digest,
                          const std::string& descriptor_json);
        void remove_referrer(const std::string& repo, const std::string& subject, const std::string& digest);
        void put_upload(const std::string& id, const UploadRecord& record);
        void remove_upload(const std::string& id);
        // The log sequence is assigned at commit, in commit order.
        void log(const Event& event);
        bool empty() const;

    private:
        friend class MetaStore;
        struct Impl;
        std::unique_ptr<Impl> impl_;
    };

    // Atomic; returns the sequence of the last log event (or the current head).
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
    std::optional<UploadRecord> upload(const std::string& id) const;

    // Live tags of repo after `after`, in byte order, at most limit.
    std::vector<std::string> tags(const std::string& repo, const std::string& after, std::size_t limit) const;
    // Live tags of repo that point at digest.
    std::vector<std::string> tags_of(const std::string& repo, const std::string& digest) const;
    std::vector<std::string> repositories(const std::string& after, std::size_t limit) const;
    std::vector<std::string> referrers(const std::string& repo, const std::string& subject) const;
    std::vector<std::pair<std::string, UploadRecord>> uploads() const;

    std::vector<LogEntry> read_log(std::uint64_t after, std::size_t limit) const;
    std::uint64_t log_head() const;

    // Every manifest, tag and link record, tombstones included, as of one
    // consistent moment; returns the log head at that moment.
    struct StateVisitor {
        virtual ~StateVisitor() = default;
        virtual void manifest(const std::string& repo, const std::string& digest, const ManifestRecord& r) = 0;
        virtual void tag(const std::string& repo, const std::string& tag, const TagRecord& r) = 0;
        virtual void link(const std::string& repo, const std::string& digest, const LinkRecord& r) = 0;
    };
    std::uint64_t visit_state(StateVisitor& visitor) const;

    std::optional<std::string> setting(const std::string& key) const;
    void put_setting(const std::string& key, const std::string& value);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace berth::storage
