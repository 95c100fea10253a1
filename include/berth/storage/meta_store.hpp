#pragma once
// The RocksDB index: repositories, manifests, tags, repository→blob links,
// referrers, upload sessions and the append-only change log. Every change goes
// through a Batch that commits atomically and durably together with its log events.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
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

// A replica's whole state, read in pages for a peer's bootstrap, in the
// order the receiver applies it: blobs' links first, then manifests that are
// not indexes (and every tombstone), then indexes (whose children are there
// by then), then tags.
enum class StatePart { links, images, indexes, tags };

struct StateRecord {
    std::string repo;
    std::string key;  // the digest (links, manifests) or the tag
    Stamp stamp;
    bool deleted = false;
    std::string digest;      // tags: what the tag points at
    std::string media_type;  // manifests
    std::string bytes;       // live manifests
};

struct StatePage {
    std::vector<StateRecord> records;
    std::string last;       // the last key read (raw); the next page starts after it
    bool done = false;      // nothing of this part after `last`
    std::string hash;       // of the records' keys and stamps: equal on two stores that agree
    std::size_t count = 0;  // records in the page, also when they were not asked for
};

// A consistent moment of the index, held open across pages (a RocksDB
// snapshot); released with the last reference.
class StateView {
public:
    virtual ~StateView() = default;
    std::uint64_t head = 0;  // the change log's head at that moment
};

// The change log as it stands, for its metrics.
struct LogStats {
    std::uint64_t entries = 0;
    std::uint64_t bytes = 0;      // RocksDB's estimate, files and memtables
    std::uint64_t oldest_ms = 0;  // physical time of the oldest entry's stamp; 0: empty
};

// Memory the index holds, each part bounded by the configuration: the record cache by
// metadata_cache_bytes, RocksDB's memtables and block cache by fixed budgets; table readers
// (index and filter blocks of open files) grow with the number of table files.
struct IndexMemory {
    std::uint64_t record_cache = 0, memtables = 0, block_cache = 0, table_readers = 0;
};

class MetaStore {
public:
    enum class Mode { read_write, read_only };
    // read_only opens beside a running server (for `berth gc --dry-run`).
    // cache_bytes: the budget of the manifest, tag and tag-page caches.
    explicit MetaStore(const std::filesystem::path& dir, Mode mode = Mode::read_write,
                       std::size_t cache_bytes = default_cache_bytes);
    static constexpr std::size_t default_cache_bytes = 64 << 20;
    ~MetaStore();
    MetaStore(const MetaStore&) = delete;
    MetaStore& operator=(const MetaStore&) = delete;

    class Batch {
    public:
        Batch();
        // cause: what its events say caused them (Event::cause), when not a client.
        explicit Batch(std::string cause, std::string principal = {});
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
        void record_tag(const std::string& repo, const std::string& tag, const std::string& digest, const Stamp& stamp);
        // A manifest's push that its delete overtook on the way here: the tombstone stays, notes the
        // push (ManifestRecord::pushed), and the push is logged, once, as record_overtaken_tag says.
        void record_overtaken_manifest(const std::string& repo, const std::string& digest,
                                       const ManifestRecord& tombstone, const Stamp& push);
        // A tag's move that a newer one overtook before it arrived here: not applied, but kept in the
        // tag's history and logged, so this replica's log (what it tells receivers of changes, and
        // its peers) holds every acknowledged move. Written once per replica: tag_named_at then
        // knows it.
        void record_overtaken_tag(const std::string& repo, const std::string& tag, const std::string& digest,
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
    // Makes every write made before the call durable. Callers that come while an fsync is in
    // flight wait for the next one, which covers them all (group commit); a call with nothing
    // new since the last fsync returns at once.
    void sync();
    std::uint64_t wal_syncs() const;  // fsyncs sync() has made
    // Held around read-compare-commit of stamped records, so that a write
    // carrying an older stamp can never overwrite a newer one.
    std::unique_lock<std::mutex> lock_writes();

    // bypass: a read made once in the background (an event described) looks in the record cache
    // but adds nothing to it, so it pushes out nothing clients read often.
    enum class CacheUse { fill, bypass };
    std::optional<ManifestRecord> manifest(const std::string& repo, const std::string& digest,
                                           CacheUse use = CacheUse::fill) const;
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
    // The same one descriptor at a time, in digest order, until visit returns false.
    void visit_referrers(const std::string& repo, const std::string& subject,
                         const std::function<bool(std::string_view descriptor)>& visit) const;
    std::vector<std::pair<std::string, UploadRecord>> uploads() const;
    // A repository's live tags, manifests and links, in byte order: for
    // retention and garbage collection, which go a repository at a time
    // rather than load the store.
    void visit_tags(const std::string& repo,
                    const std::function<void(const std::string& tag, const TagRecord&)>& visit) const;
    void visit_manifests(const std::string& repo,
                         const std::function<void(const std::string& digest, const ManifestRecord&)>& visit) const;
    void visit_links(const std::string& repo,
                     const std::function<void(const std::string& digest, const LinkRecord&)>& visit) const;

    // When this replica last served a tag or digest (storage/pull_times.hpp):
    // its own, neither logged nor replicated, written without an fsync.
    struct Pull {
        std::string repo, name;
        std::uint64_t ms = 0;
    };
    void put_pulls(const std::vector<Pull>& pulls);
    std::optional<std::uint64_t> pull_time(const std::string& repo, const std::string& name) const;
    // A repository's pull times of names after `after`, in byte order, until visit returns false.
    void visit_pulls(const std::string& repo, const std::string& after,
                     const std::function<bool(const std::string& name, std::uint64_t ms)>& visit) const;

    std::vector<LogEntry> read_log(std::uint64_t after, std::size_t limit) const;
    std::uint64_t log_head() const;
    // The oldest sequence still in the log (log_head() + 1 when it is empty).
    std::uint64_t log_first() const;
    // The last sequence committed before `ms` (wall clock, ms since the
    // epoch), as far as this process knows: entries from before its start
    // count as written at its start.
    std::uint64_t log_written_before(std::uint64_t ms) const;
    // Drops every entry up to and including `through`, first noting per origin replica the newest
    // change it drops (log_compacted()).
    void compact_log(std::uint64_t through);
    // Per origin replica, the newest change compaction has taken from this replica's log.
    std::map<std::string, std::uint64_t> log_compacted() const;
    LogStats log_stats() const;
    IndexMemory memory() const;

    // Every manifest, tag and link record, tombstones included, as of one
    // consistent moment; returns the log head at that moment.
    struct StateVisitor {
        virtual ~StateVisitor() = default;
        virtual void manifest(const std::string& repo, const std::string& digest, const ManifestRecord& r) = 0;
        virtual void tag(const std::string& repo, const std::string& tag, const TagRecord& r) = 0;
        virtual void link(const std::string& repo, const std::string& digest, const LinkRecord& r) = 0;
    };
    std::uint64_t visit_state(StateVisitor& visitor) const;

    std::shared_ptr<const StateView> state_view() const;
    // The records of `part` after the raw key `after` ("": from the first) in
    // `view` (nullptr: as they are now): at most `limit` records and about
    // `max_bytes` of manifests. Without records, only last/done/hash, so a
    // receiver can compare a range before it asks for its content.
    StatePage state_page(const StateView* view, StatePart part, const std::string& after, std::size_t limit,
                         std::size_t max_bytes, bool with_records) const;
    // The hash state_page gives, over this store's current records of `part`
    // in (after, last].
    std::string state_hash(StatePart part, const std::string& after, const std::string& last) const;
    // A record's stamp and whether it is a tombstone, read past the caches
    // (a bootstrap must not churn them).
    std::optional<std::pair<Stamp, bool>> stamp_of(StatePart part, const std::string& repo,
                                                   const std::string& key) const;
    // Namespace usage: the deduplicated bytes of the blobs linked into a
    // namespace's repositories, and how many repositories it holds. Every
    // commit keeps it, whoever writes (pushes, the applier, garbage collection).
    NamespaceUsage usage(const std::string& ns) const;
    // Namespaces holding anything, after `after` in byte order, at most limit.
    std::vector<std::pair<std::string, NamespaceUsage>> usages(const std::string& after, std::size_t limit) const;
    // A repository's totals, kept by the same commits (the web UI's listings).
    RepositoryUsage repository_usage(const std::string& repo) const;
    // What committing batch now would do to each namespace it touches. It
    // stays true until the commit while the caller holds lock_writes().
    std::vector<UsageChange> usage_change(const Batch& batch) const;
    // Counts usage from every link and repository once, for a store that an
    // older berth wrote (no-op when it is counted: settings key usage_counted).
    // blob_size: a blob's bytes (0 when it is gone). Call before serving.
    void count_usage(const std::function<std::uint64_t(const std::string& digest)>& blob_size);

    // Lineage (the `lineage` column family): what manifests are built on, kept by every
    // commit that writes manifests or tags. Layers are digests, in the manifest's order.
    struct ManifestRef {
        std::string repo, digest;
        auto operator<=>(const ManifestRef&) const = default;
    };
    // Live image manifests whose layer list is exactly `layers`, at most limit.
    std::vector<ManifestRef> with_layers(const std::vector<std::string>& layers, std::size_t limit) const;
    // Live image manifests whose whole layer list is a proper prefix of `layers`, at most max_length
    // layers long: what an image may be built on, longest first, at most per_length of each length
    // (the web UI's "base image"; one seek per length, on one iterator).
    std::vector<std::pair<std::size_t, ManifestRef>> bases_of(const std::vector<std::string>& layers,
                                                              std::size_t max_length, std::size_t per_length) const;
    // Live image manifests whose layer list begins with `layers` (or is it), in (repo, digest)
    // order after `after`, at most limit.
    std::vector<ManifestRef> built_on(const std::vector<std::string>& layers, const ManifestRef& after,
                                      std::size_t limit) const;
    // Live indexes of repo that list child.
    std::vector<std::string> indexes_listing(const std::string& repo, const std::string& child) const;
    // When the tag last named digest here (hybrid clock), if it ever did.
    std::optional<std::uint64_t> tag_named_at(const std::string& repo, const std::string& tag,
                                              const std::string& digest) const;
    // Every digest a tag named since this replica held it, oldest first.
    std::vector<std::string> tag_history(const std::string& repo, const std::string& tag) const;
    // Every tag that ever named digest here.
    std::vector<std::string> tags_ever(const std::string& repo, const std::string& digest) const;
    // Every (repository, tag, digest) ever, of repositories beginning with repo_prefix, until visit returns false.
    void visit_tag_history(const std::string& repo_prefix,
                           const std::function<bool(const std::string& repo, const std::string& tag,
                                                    const std::string& digest)>& visit) const;
    // Indexes every manifest and tag once, for a store that an older berth wrote (no-op when it is
    // indexed: settings key lineage_indexed). Call before serving.
    void index_lineage();

    // A copy of every column family as of one moment, as a RocksDB store of its own in dir
    // (which must not exist): what a backup holds (storage/backup.hpp). Also beside a running
    // berth, read-only. Returns the copy's log head.
    std::uint64_t copy_to(const std::filesystem::path& dir) const;

    std::optional<std::string> setting(const std::string& key) const;
    // Durability::now fsyncs; none is for what a crash of the machine may take back (a process's
    // crash keeps it either way).
    void put_setting(const std::string& key, const std::string& value, Durability durability = Durability::now);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace berth::storage
