#include "berth/storage/meta_store.hpp"
#include "berth/storage/hybrid_clock.hpp"
#include "berth/storage/layout.hpp"
#include "berth/oci/media_types.hpp"
#include "usage_tally.hpp"

#include <rocksdb/db.h>
#include <rocksdb/cache.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <rocksdb/write_buffer_manager.h>
#include <rocksdb/write_batch.h>

#include <deque>
#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace berth::storage {
namespace {

using nlohmann::json;

using namespace layout;  // column families and key shapes: layout.hpp

std::string key(const std::string& a, const std::string& b) {
    std::string out;
    out.reserve(a.size() + b.size() + 1);
    out += a;
    out += '\0';
    out += b;
    return out;
}

std::string sequence_key(std::uint64_t sequence) {
    std::string out(8, '\0');
    for (int i = 7; i >= 0; --i, sequence >>= 8) out[i] = static_cast<char>(sequence & 0xff);
    return out;
}

std::uint64_t sequence_of(const rocksdb::Slice& key) {
    std::uint64_t out = 0;
    for (std::size_t i = 0; i < 8 && i < key.size(); ++i) out = (out << 8) | static_cast<unsigned char>(key[i]);
    return out;
}

void check(const rocksdb::Status& status, const char* what) {
    if (!status.ok()) throw std::runtime_error(std::string(what) + ": " + status.ToString());
}

json stamp_json(const Stamp& stamp) { return {{"c", stamp.clock}, {"r", stamp.replica}}; }
Stamp stamp_of(const json& j) { return {j.at("c").get<std::uint64_t>(), j.at("r").get<std::string>()}; }

std::string encode(const TagRecord& r) { return json{{"d", r.digest}, {"s", stamp_json(r.stamp)}}.dump(); }
// Listing tags only needs to tell tombstones apart, without parsing each
// record: the encoding above always starts with the digest, empty for a tombstone.
bool tombstone(std::string_view encoded_tag) { return encoded_tag.starts_with(R"({"d":"")"); }
TagRecord decode_tag(std::string_view v) {
    auto j = json::parse(v);
    return {j.at("d").get<std::string>(), stamp_of(j.at("s"))};
}

// Header JSON, a NUL, then the manifest bytes untouched.
std::string encode(const ManifestRecord& r) {
    std::string out = json{
        {"t", r.media_type},
        {"sub", r.subject},
        {"ref", r.referrer_json},
        {"s", stamp_json(r.stamp)},
        {"del",
         r.deleted}}.dump();
    out += '\0';
    out += r.bytes;
    return out;
}
ManifestRecord decode_manifest(const std::string& v) {
    auto nul = v.find('\0');
    auto j = json::parse(v.substr(0, nul));
    ManifestRecord r{
        j.at("t").get<std::string>(), j.at("sub").get<std::string>(), j.at("ref").get<std::string>(), v.substr(nul + 1),
        stamp_of(j.at("s")),          j.at("del").get<bool>()};
    return r;
}

std::string encode(const LinkRecord& r) { return json{{"s", stamp_json(r.stamp)}, {"del", r.deleted}}.dump(); }
LinkRecord decode_link(const std::string& v) {
    auto j = json::parse(v);
    return {stamp_of(j.at("s")), j.at("del").get<bool>()};
}

std::string encode(const UploadRecord& r) { return json{{"repo", r.repository}, {"alg", r.algorithm}}.dump(); }
UploadRecord decode_upload(std::string_view v) {
    auto j = json::parse(v);
    return {j.at("repo").get<std::string>(), j.at("alg").get<std::string>()};
}

}  // namespace

struct MetaStore::Batch::Impl {
    struct Op {
        int family;
        std::string key;
        std::optional<std::string> value;  // nullopt deletes
    };
    // A link written, for namespace usage: commit compares it with the link it replaces.
    struct LinkWrite {
        std::string repo, digest;
        bool live;
        std::uint64_t size;
    };
    std::vector<Op> ops;
    std::vector<LinkWrite> links;
    std::vector<std::string> events;  // as the log stores them
    std::vector<Event> logged;

    void add_repository(const std::string& repo) { ops.push_back({cf_repos, repo, ""}); }
    void put_manifest(const std::string& repo, const std::string& digest, const ManifestRecord& r) {
        ops.push_back({cf_manifests, key(repo, digest), encode(r)});
    }
    void put_referrer(const std::string& repo, const std::string& subject, const std::string& digest,
                      std::optional<std::string> descriptor_json) {
        ops.push_back({cf_referrers, key(key(repo, subject), digest), std::move(descriptor_json)});
    }
    void log(Event event) {
        add_repository(event.repo);
        events.push_back(event.json());
        logged.push_back(std::move(event));
    }
};

MetaStore::Batch::Batch() : impl_(std::make_unique<Impl>()) {}
MetaStore::Batch::~Batch() = default;
MetaStore::Batch::Batch(Batch&&) noexcept = default;

void MetaStore::Batch::record_manifest(const std::string& repo, const oci::Digest& digest,
                                       const oci::ParsedManifest& parsed, std::string bytes, const Stamp& stamp) {
    const auto digest_text = digest.str();
    ManifestRecord record{parsed.media_type, {}, {}, std::move(bytes), stamp, false};
    if (parsed.subject) {
        record.subject = parsed.subject->digest.str();
        record.referrer_json = oci::referrer_descriptor_json(parsed, digest, record.bytes.size());
        impl_->put_referrer(repo, record.subject, digest_text, record.referrer_json);
    }
    impl_->put_manifest(repo, digest_text, record);
    impl_->log({Event::Type::manifest, repo, digest_text, {}, stamp});
}
void MetaStore::Batch::tombstone_manifest(const std::string& repo, const std::string& digest,
                                          const ManifestRecord* current, const Stamp& stamp) {
    // A tombstone, not an erase: a replica must not bring the manifest back.
    ManifestRecord tombstone{};
    tombstone.stamp = stamp;
    tombstone.deleted = true;
    if (current) {
        tombstone.media_type = current->media_type;
        tombstone.subject = current->subject;
        if (!current->subject.empty()) impl_->put_referrer(repo, current->subject, digest, std::nullopt);
    }
    impl_->put_manifest(repo, digest, tombstone);
    impl_->ops.push_back({cf_pulls, key(repo, digest), std::nullopt});
    impl_->log({Event::Type::manifest_deleted, repo, digest, {}, stamp});
}
void MetaStore::Batch::record_tag(const std::string& repo, const std::string& tag, const std::string& digest,
                                  const Stamp& stamp) {
    impl_->ops.push_back({cf_tags, key(repo, tag), encode(TagRecord{digest, stamp})});
    // A tag pushed again later starts from its push, not from pulls of the one deleted.
    if (digest.empty()) impl_->ops.push_back({cf_pulls, key(repo, tag), std::nullopt});
    impl_->log({digest.empty() ? Event::Type::tag_deleted : Event::Type::tag, repo, digest, tag, stamp});
}
void MetaStore::Batch::record_link(const std::string& repo, const std::string& digest, const Stamp& stamp, bool deleted,
                                   std::uint64_t size) {
    impl_->ops.push_back({cf_links, key(repo, digest), encode(LinkRecord{stamp, deleted})});
    impl_->links.push_back({repo, digest, !deleted, size});
    impl_->log({deleted ? Event::Type::unlink : Event::Type::link, repo, digest, {}, stamp});
}
const std::vector<Event>& MetaStore::Batch::events() const { return impl_->logged; }
void MetaStore::Batch::put_upload(const std::string& id, const UploadRecord& r) {
    impl_->ops.push_back({cf_uploads, id, encode(r)});
}
void MetaStore::Batch::remove_upload(const std::string& id) { impl_->ops.push_back({cf_uploads, id, std::nullopt}); }
// Decoded manifest and tag records and pages of tag lists, in front of RocksDB
// for the hot read paths (manifest GET by tag, tags list). A commit invalidates
// what it writes and bumps the generation; a reader caches what it read only if
// no commit came between its read and its insert, so the cache never holds a
// value older than the index.
//
// Each kind has a share of the byte budget, split in two halves: new entries
// go into the young half; when it is full it becomes the old half and the
// previous old half is dropped, and a hit in the old half moves the entry back
// into the young one. That keeps what is read often, costs no bookkeeping per
// read, and never holds more than the budget.
template <typename Map>
struct Halves {
    Map young, old;
    std::size_t young_bytes = 0;

    template <typename Key>
    void erase(const Key& key) {
        young.erase(key);
        old.erase(key);
    }
    void clear() {
        young.clear();
        old.clear();
        young_bytes = 0;
    }
};

class RecordCache {
public:
    explicit RecordCache(std::size_t budget)
        : manifests_limit_(budget / 2), tags_limit_(budget / 4), pages_limit_(budget / 4) {}

    template <typename Map, typename Load, typename Record = typename Map::mapped_type>
    std::optional<Record> get(Halves<Map>& halves, const std::string& key, Load load,
                              std::size_t (*cost)(const Record&)) {
        const auto limit = limit_of(halves);
        std::uint64_t generation;
        {
            std::lock_guard lock(mutex_);
            if (auto it = halves.young.find(key); it != halves.young.end()) return it->second;
            if (auto it = halves.old.find(key); it != halves.old.end()) {
                Record record = std::move(it->second);
                halves.old.erase(it);
                insert(halves, key, record, cost(record) + key.size(), limit);
                return record;
            }
            generation = generation_;
        }
        auto loaded = load();
        if (!loaded) return loaded;
        std::lock_guard lock(mutex_);
        if (generation == generation_) insert(halves, key, *loaded, cost(*loaded) + key.size(), limit);
        return loaded;
    }

    void invalidate(const std::vector<std::pair<int, std::string>>& keys) {
        std::lock_guard lock(mutex_);
        ++generation_;
        for (auto& [family, key] : keys) {
            if (family == cf_manifests) {
                manifests.erase(key);
            } else if (family == cf_tags) {
                tags.erase(key);
                // Any tag written drops every cached page of its repository:
                // page keys are "repo\0after\0limit", the tag key is "repo\0tag".
                const auto repo = key.substr(0, key.find('\0'));
                for (auto* pages : {&tag_pages.young, &tag_pages.old})
                    pages->erase(pages->lower_bound(repo + '\0'), pages->lower_bound(repo + '\1'));
            }
        }
    }

    Halves<std::unordered_map<std::string, ManifestRecord>> manifests;
    Halves<std::unordered_map<std::string, TagRecord>> tags;
    Halves<std::map<std::string, std::vector<std::string>>> tag_pages;

private:
    template <typename H>
    std::size_t limit_of(const H&) const {
        if constexpr (std::is_same_v<H, decltype(manifests)>) return manifests_limit_;
        else if constexpr (std::is_same_v<H, decltype(tags)>) return tags_limit_;
        else return pages_limit_;
    }
    template <typename H, typename Record>
    void insert(H& halves, const std::string& key, const Record& record, std::size_t bytes, std::size_t limit) {
        if (bytes > limit / 2) return;  // larger than a half: never worth what it would push out
        if (halves.young_bytes + bytes > limit / 2) {
            halves.old = std::move(halves.young);
            halves.young = {};
            halves.young_bytes = 0;
        }
        halves.young.insert_or_assign(key, record);
        halves.young_bytes += bytes;
    }

    const std::size_t manifests_limit_, tags_limit_, pages_limit_;
    std::mutex mutex_;
    std::uint64_t generation_ = 0;
};

std::size_t manifest_cost(const ManifestRecord& r) { return r.bytes.size() + r.referrer_json.size() + 128; }
std::size_t tag_cost(const TagRecord& r) { return r.digest.size() + 64; }
std::size_t page_cost(const std::vector<std::string>& page) {
    std::size_t bytes = 64;
    for (auto& tag : page) bytes += tag.size() + sizeof(std::string);
    return bytes;
}

std::uint64_t wall_ms() {
    using namespace std::chrono;
    return static_cast<std::uint64_t>(duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count());
}

struct MetaStore::Impl {
    explicit Impl(std::size_t cache_bytes) : cache(cache_bytes) {}
    std::unique_ptr<rocksdb::DB> db;
    RecordCache cache;
    // (wall ms, head then): every entry up to the head was written by that
    // time. One a second at most, and only as far back as compaction asks.
    std::deque<std::pair<std::uint64_t, std::uint64_t>> log_times;  // guarded by commit_mutex
    std::uint64_t last_commit_ms = 0;                               // the head's entry was written then
    std::vector<rocksdb::ColumnFamilyHandle*> families;
    std::mutex commit_mutex;  // log sequences follow commit order
    std::mutex write_mutex;   // see lock_writes()
    std::uint64_t head = 0;

    rocksdb::ColumnFamilyHandle* cf(int f) const { return families[f]; }

    // What batch does to namespace usage, against the index as it stands: the
    // caller holds commit_mutex, so nothing is written in between.
    UsageTally tally(const Batch::Impl& batch) const {
        UsageTally tally([this](const std::string& k) { return get(cf_usage, k); });
        std::map<std::string, bool> live;  // links written earlier in this batch
        for (auto& link : batch.links) {
            auto k = key(link.repo, link.digest);
            auto it = live.find(k);
            bool was = it != live.end() ? it->second : false;
            if (it == live.end())
                if (auto value = get(cf_links, k)) was = !decode_link(*value).deleted;
            tally.link(link.repo, link.digest, was, link.live, link.size);
            live[k] = link.live;
        }
        std::set<std::string> repos;
        for (auto& op : batch.ops)
            if (op.family == cf_repos && repos.insert(op.key).second && !get(cf_repos, op.key))
                tally.repository_added(op.key);
        return tally;
    }

    std::optional<std::string> get(int f, const std::string& k) const {
        if (!cf(f)) return std::nullopt;  // see the constructor
        std::string value;
        auto status = db->Get(rocksdb::ReadOptions(), cf(f), k, &value);
        if (status.IsNotFound()) return std::nullopt;
        check(status, "rocksdb get");
        return value;
    }

    // Visits entries under prefix, strictly after `after` when given, until visit returns false.
    template <typename Visit>
    void scan(int f, const std::string& prefix, const std::string& after, Visit visit) const {
        if (!cf(f)) return;
        std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), cf(f)));
        for (it->Seek(after.empty() ? prefix : after); it->Valid(); it->Next()) {
            auto k = it->key();
            if (!k.starts_with(prefix)) break;
            if (!after.empty() && k == rocksdb::Slice(after)) continue;
            if (!visit(std::string_view(k.data() + prefix.size(), k.size() - prefix.size()),
                       it->value().ToStringView()))
                break;
        }
        check(it->status(), "rocksdb iterate");
    }
};

MetaStore::MetaStore(const std::filesystem::path& dir, Mode mode, std::size_t cache_bytes)
    : impl_(std::make_unique<Impl>(cache_bytes)) {
    if (mode == Mode::read_write) std::filesystem::create_directories(dir);
    rocksdb::DBOptions options;
    options.create_if_missing = true;
    options.create_missing_column_families = true;
    options.max_background_jobs = 2;
    options.keep_log_file_num = 4;
    // RocksDB's memory has one bound whatever the store's size or the write
    // rate (a bootstrap writes millions of records): memtables of every column
    // family together, and one block cache shared by all (by default each
    // family would get its own).
    options.write_buffer_manager = std::make_shared<rocksdb::WriteBufferManager>(32 << 20);
    rocksdb::BlockBasedTableOptions table_options;
    table_options.block_cache = rocksdb::NewLRUCache(32 << 20);
    // A lookup (a tag, a manifest) reads a data block only in the file that
    // holds the key: with millions of records the other levels' files are
    // ruled out by their filters instead of by reading a block of each.
    table_options.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
    rocksdb::ColumnFamilyOptions family_options;
    family_options.write_buffer_size = 8 << 20;  // small memtables keep idle memory low
    family_options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table_options));
    // Read-only, a column family added by a newer berth may not exist yet
    // (the store was last opened by an older one): it is left out and reads as empty.
    std::vector<std::string> present;
    if (mode == Mode::read_only)
        check(rocksdb::DB::ListColumnFamilies(options, dir.string(), &present), "list column families");
    std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
    std::vector<int> opened;
    for (int f = 0; f < cf_count; ++f) {
        if (mode == Mode::read_only && std::find(present.begin(), present.end(), column_families[f]) == present.end())
            continue;
        descriptors.emplace_back(column_families[f], family_options);
        opened.push_back(f);
    }
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* db = nullptr;
    if (mode == Mode::read_only)
        check(rocksdb::DB::OpenForReadOnly(options, dir.string(), descriptors, &handles, &db),
              "open metadata index read-only");
    else check(rocksdb::DB::Open(options, dir.string(), descriptors, &handles, &db), "open metadata index");
    impl_->db.reset(db);
    impl_->families.assign(cf_count, nullptr);
    for (std::size_t i = 0; i < opened.size(); ++i) impl_->families[opened[i]] = handles[i];

    std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(rocksdb::ReadOptions(), impl_->cf(cf_log)));
    it->SeekToLast();
    if (it->Valid()) impl_->head = sequence_of(it->key());
    impl_->last_commit_ms = wall_ms();
    impl_->log_times.emplace_back(impl_->last_commit_ms, impl_->head);
}

MetaStore::~MetaStore() {
    for (auto* handle : impl_->families)
        if (handle) impl_->db->DestroyColumnFamilyHandle(handle);
    impl_->db->Close();
}

std::uint64_t MetaStore::commit(Batch& batch, Durability durability) {
    rocksdb::WriteBatch write;
    for (auto& op : batch.impl_->ops) {
        if (op.value) check(write.Put(impl_->cf(op.family), op.key, *op.value), "batch put");
        else check(write.Delete(impl_->cf(op.family), op.key), "batch delete");
    }
    rocksdb::WriteOptions options;
    options.sync = false;
    std::unique_lock lock(impl_->commit_mutex);
    auto head = impl_->head;
    for (auto& event : batch.impl_->events)
        check(write.Put(impl_->cf(cf_log), sequence_key(++head), event), "batch log");
    if (!batch.impl_->events.empty())  // links and repositories come with events
        for (auto& [k, value] : impl_->tally(*batch.impl_).writes()) {
            if (value) check(write.Put(impl_->cf(cf_usage), k, *value), "batch usage");
            else check(write.Delete(impl_->cf(cf_usage), k), "batch usage");
        }
    check(impl_->db->Write(options, &write), "commit metadata");
    impl_->head = head;
    const auto now = wall_ms();
    if (now >= impl_->log_times.back().first + 1000) impl_->log_times.emplace_back(now, head);
    // Without compaction asking, the oldest marks go: fewer marks only keep entries longer.
    if (impl_->log_times.size() > 100000) impl_->log_times.pop_front();
    impl_->last_commit_ms = now;
    std::vector<std::pair<int, std::string>> written;
    for (auto& op : batch.impl_->ops)
        if (op.family == cf_manifests || op.family == cf_tags) written.emplace_back(op.family, op.key);
    if (!written.empty()) impl_->cache.invalidate(written);
    lock.unlock();
    if (durability == Durability::now) sync();
    return head;
}

void MetaStore::sync() { check(impl_->db->SyncWAL(), "sync metadata"); }

std::unique_lock<std::mutex> MetaStore::lock_writes() { return std::unique_lock(impl_->write_mutex); }

std::optional<ManifestRecord> MetaStore::manifest(const std::string& repo, const std::string& digest) const {
    const auto k = key(repo, digest);
    return impl_->cache.get(
        impl_->cache.manifests, k,
        [&]() -> std::optional<ManifestRecord> {
            auto value = impl_->get(cf_manifests, k);
            if (!value) return std::nullopt;
            return decode_manifest(*value);
        },
        &manifest_cost);
}

std::optional<TagRecord> MetaStore::tag(const std::string& repo, const std::string& tag) const {
    const auto k = key(repo, tag);
    return impl_->cache.get(
        impl_->cache.tags, k,
        [&]() -> std::optional<TagRecord> {
            auto value = impl_->get(cf_tags, k);
            if (!value) return std::nullopt;
            return decode_tag(*value);
        },
        &tag_cost);
}

std::optional<LinkRecord> MetaStore::link(const std::string& repo, const std::string& digest) const {
    auto value = impl_->get(cf_links, key(repo, digest));
    if (!value) return std::nullopt;
    return decode_link(*value);
}

bool MetaStore::has_link(const std::string& repo, const std::string& digest) const {
    auto record = link(repo, digest);
    return record && !record->deleted;
}

bool MetaStore::has_repository(const std::string& repo) const { return impl_->get(cf_repos, repo).has_value(); }

std::vector<std::string> MetaStore::tags(const std::string& repo, const std::string& after, std::size_t limit) const {
    if (limit == 0) return {};
    auto page_key = key(key(repo, after), std::to_string(limit));
    auto page = impl_->cache.get(
        impl_->cache.tag_pages, page_key,
        [&]() -> std::optional<std::vector<std::string>> {
            std::vector<std::string> out;
            const auto prefix = key(repo, "");
            impl_->scan(cf_tags, prefix, after.empty() ? "" : prefix + after,
                        [&](std::string_view name, std::string_view v) {
                            if (!tombstone(v)) out.emplace_back(name);
                            return out.size() < limit;
                        });
            return out;
        },
        &page_cost);
    return std::move(*page);
}

std::vector<std::string> MetaStore::tags_of(const std::string& repo, const std::string& digest) const {
    std::vector<std::string> out;
    impl_->scan(cf_tags, key(repo, ""), "", [&](std::string_view name, std::string_view v) {
        if (decode_tag(v).digest == digest) out.emplace_back(name);
        return true;
    });
    return out;
}

std::vector<std::string> MetaStore::repositories(const std::string& after, std::size_t limit) const {
    std::vector<std::string> out;
    if (limit == 0) return out;
    impl_->scan(cf_repos, "", after, [&](std::string_view name, std::string_view) {
        out.emplace_back(name);
        return out.size() < limit;
    });
    return out;
}

std::vector<std::string> MetaStore::referrers(const std::string& repo, const std::string& subject) const {
    std::vector<std::string> out;
    impl_->scan(cf_referrers, key(key(repo, subject), ""), "", [&](std::string_view, std::string_view v) {
        out.emplace_back(v);
        return true;
    });
    return out;
}

std::vector<std::pair<std::string, UploadRecord>> MetaStore::uploads() const {
    std::vector<std::pair<std::string, UploadRecord>> out;
    impl_->scan(cf_uploads, "", "", [&](std::string_view id, std::string_view v) {
        out.emplace_back(std::string(id), decode_upload(v));
        return true;
    });
    return out;
}

void MetaStore::visit_tags(const std::string& repo,
                           const std::function<void(const std::string&, const TagRecord&)>& visit) const {
    std::string tag;
    impl_->scan(cf_tags, key(repo, ""), "", [&](std::string_view name, std::string_view v) {
        if (tombstone(v)) return true;
        tag.assign(name);
        visit(tag, decode_tag(v));
        return true;
    });
}

namespace {

// A repository's live records of one family, decoded: visit_manifests and visit_links.
template <typename Impl, typename Decode, typename Visit>
void visit_live(const Impl& impl, int family, const std::string& repo, Decode decode, const Visit& visit) {
    std::string name;
    impl.scan(family, key(repo, ""), "", [&](std::string_view k, std::string_view v) {
        auto record = decode(std::string(v));
        if (record.deleted) return true;
        name.assign(k);
        visit(name, record);
        return true;
    });
}

}  // namespace

void MetaStore::visit_manifests(const std::string& repo,
                                const std::function<void(const std::string&, const ManifestRecord&)>& visit) const {
    visit_live(*impl_, cf_manifests, repo, decode_manifest, visit);
}

void MetaStore::visit_links(const std::string& repo,
                            const std::function<void(const std::string&, const LinkRecord&)>& visit) const {
    visit_live(*impl_, cf_links, repo, decode_link, visit);
}

void MetaStore::put_pulls(const std::vector<Pull>& pulls) {
    if (pulls.empty() || !impl_->cf(cf_pulls)) return;
    rocksdb::WriteBatch write;
    // Times in the log sequences' form, 8 bytes big-endian.
    for (auto& pull : pulls)
        check(write.Put(impl_->cf(cf_pulls), key(pull.repo, pull.name), sequence_key(pull.ms)), "batch put");
    rocksdb::WriteOptions options;
    options.sync = false;  // the next durable commit syncs them; a crash loses at most those since
    check(impl_->db->Write(options, &write), "write pull times");
}

std::optional<std::uint64_t> MetaStore::pull_time(const std::string& repo, const std::string& name) const {
    auto value = impl_->get(cf_pulls, key(repo, name));
    if (!value) return std::nullopt;
    return sequence_of(*value);
}

void MetaStore::visit_pulls(const std::string& repo, const std::string& after,
                            const std::function<bool(const std::string&, std::uint64_t)>& visit) const {
    const auto prefix = key(repo, "");
    std::string name;
    impl_->scan(cf_pulls, prefix, after.empty() ? "" : prefix + after, [&](std::string_view n, std::string_view v) {
        name.assign(n);
        return visit(name, sequence_of(rocksdb::Slice(v.data(), v.size())));
    });
}

std::vector<LogEntry> MetaStore::read_log(std::uint64_t after, std::size_t limit) const {
    std::vector<LogEntry> out;
    if (limit == 0) return out;
    std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(rocksdb::ReadOptions(), impl_->cf(cf_log)));
    for (it->Seek(sequence_key(after + 1)); it->Valid() && out.size() < limit; it->Next())
        out.push_back({sequence_of(it->key()), it->value().ToString()});
    check(it->status(), "rocksdb iterate log");
    return out;
}

LogStats MetaStore::log_stats() const {
    LogStats stats;
    std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(rocksdb::ReadOptions(), impl_->cf(cf_log)));
    it->SeekToFirst();
    if (!it->Valid()) return stats;
    stats.entries = log_head() - sequence_of(it->key()) + 1;
    if (auto event = Event::parse(it->value().ToString()))
        stats.oldest_ms = HybridClock::physical_ms(event->stamp.clock);
    const auto first = sequence_key(0), last = sequence_key(UINT64_MAX);
    const rocksdb::Range range(first, last);
    rocksdb::SizeApproximationOptions options;
    options.include_memtables = true;
    check(impl_->db->GetApproximateSizes(options, impl_->cf(cf_log), &range, 1, &stats.bytes), "rocksdb log size");
    return stats;
}

std::uint64_t MetaStore::log_head() const {
    std::lock_guard lock(impl_->commit_mutex);
    return impl_->head;
}

std::uint64_t MetaStore::visit_state(StateVisitor& visitor) const {
    const rocksdb::Snapshot* snapshot;
    std::uint64_t head;
    {
        std::lock_guard lock(impl_->commit_mutex);  // the head and the snapshot describe the same moment
        snapshot = impl_->db->GetSnapshot();
        head = impl_->head;
    }
    rocksdb::ReadOptions options;
    options.snapshot = snapshot;
    auto each = [&](int family, auto visit) {
        std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(options, impl_->cf(family)));
        for (it->SeekToFirst(); it->Valid(); it->Next()) {
            auto k = it->key().ToString();
            auto nul = k.find('\0');
            visit(k.substr(0, nul), k.substr(nul + 1), it->value().ToString());
        }
        check(it->status(), "rocksdb iterate state");
    };
    try {
        each(cf_manifests, [&](auto repo, auto digest, auto v) { visitor.manifest(repo, digest, decode_manifest(v)); });
        each(cf_tags, [&](auto repo, auto tag, auto v) { visitor.tag(repo, tag, decode_tag(v)); });
        each(cf_links, [&](auto repo, auto digest, auto v) { visitor.link(repo, digest, decode_link(v)); });
    } catch (...) {
        impl_->db->ReleaseSnapshot(snapshot);
        throw;
    }
    impl_->db->ReleaseSnapshot(snapshot);
    return head;
}

namespace {

int family_of(StatePart part) {
    switch (part) {
        case StatePart::links: return cf_links;
        case StatePart::images:
        case StatePart::indexes: return cf_manifests;
        case StatePart::tags: return cf_tags;
    }
    return cf_links;
}

bool is_index(std::string_view media_type) {
    return media_type == oci::media_type::oci_index || media_type == oci::media_type::docker_manifest_list;
}

// One record of a part, decoded; nullopt when it belongs to the other manifest part.
std::optional<StateRecord> decode_state(StatePart part, std::string_view key, const std::string& value) {
    const auto nul = key.find('\0');
    StateRecord r{std::string(key.substr(0, nul)), std::string(key.substr(nul + 1)), {}, false, {}, {}, {}};
    switch (part) {
        case StatePart::links: {
            auto link = decode_link(value);
            r.stamp = link.stamp;
            r.deleted = link.deleted;
            break;
        }
        case StatePart::images:
        case StatePart::indexes: {
            auto m = decode_manifest(value);
            if ((part == StatePart::indexes) != (!m.deleted && is_index(m.media_type))) return std::nullopt;
            r.stamp = m.stamp;
            r.deleted = m.deleted;
            r.media_type = std::move(m.media_type);
            r.bytes = std::move(m.bytes);
            break;
        }
        case StatePart::tags: {
            auto tag = decode_tag(value);
            r.stamp = tag.stamp;
            r.deleted = tag.deleted();
            r.digest = std::move(tag.digest);
            break;
        }
    }
    return r;
}

// What two stores must agree on for a record to need no transfer.
void hash_record(oci::Hasher& hasher, std::string_view key, const StateRecord& r) {
    std::string text(key);
    for (auto part : {std::to_string(r.stamp.clock), r.stamp.replica, std::string(r.deleted ? "d" : "l"), r.digest}) {
        text += '\0';
        text += part;
    }
    text += '\n';
    hasher.update(text.data(), text.size());
}

class RocksStateView : public StateView {
public:
    RocksStateView(rocksdb::DB* db, const rocksdb::Snapshot* snapshot) : db_(db), snapshot_(snapshot) {}
    ~RocksStateView() override { db_->ReleaseSnapshot(snapshot_); }
    const rocksdb::Snapshot* snapshot() const { return snapshot_; }

private:
    rocksdb::DB* db_;
    const rocksdb::Snapshot* snapshot_;
};

}  // namespace

std::shared_ptr<const StateView> MetaStore::state_view() const {
    std::lock_guard lock(impl_->commit_mutex);  // the head and the snapshot describe the same moment
    auto view = std::make_shared<RocksStateView>(impl_->db.get(), impl_->db->GetSnapshot());
    view->head = impl_->head;
    return view;
}

StatePage MetaStore::state_page(const StateView* view, StatePart part, const std::string& after, std::size_t limit,
                                std::size_t max_bytes, bool with_records) const {
    rocksdb::ReadOptions options;
    if (view) options.snapshot = static_cast<const RocksStateView*>(view)->snapshot();
    options.fill_cache = false;  // a bootstrap reads everything once
    std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(options, impl_->cf(family_of(part))));
    if (after.empty()) it->SeekToFirst();
    else {
        it->Seek(after);
        if (it->Valid() && it->key() == rocksdb::Slice(after)) it->Next();
    }
    StatePage page;
    oci::Hasher hasher(oci::DigestAlgorithm::sha256);
    // Scanned records bound a page too: indexes are rare among manifests.
    std::size_t matched = 0, scanned = 0, bytes = 0;
    for (; it->Valid() && matched < limit && scanned < limit * 8 && bytes < max_bytes; it->Next()) {
        ++scanned;
        page.last = it->key().ToString();
        auto record = decode_state(part, page.last, it->value().ToString());
        if (!record) continue;
        ++matched;
        bytes += it->value().size();
        hash_record(hasher, page.last, *record);
        if (with_records) page.records.push_back(std::move(*record));
    }
    check(it->status(), "rocksdb iterate state");
    page.done = !it->Valid();
    page.hash = hasher.peek().hex();
    page.count = matched;
    return page;
}

std::string MetaStore::state_hash(StatePart part, const std::string& after, const std::string& last) const {
    rocksdb::ReadOptions options;
    options.fill_cache = false;
    std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(options, impl_->cf(family_of(part))));
    oci::Hasher hasher(oci::DigestAlgorithm::sha256);
    if (after.empty()) it->SeekToFirst();
    else it->Seek(after);
    for (; it->Valid() && it->key().compare(rocksdb::Slice(last)) <= 0; it->Next()) {
        if (!after.empty() && it->key() == rocksdb::Slice(after)) continue;
        auto key = it->key().ToString();
        if (auto record = decode_state(part, key, it->value().ToString())) hash_record(hasher, key, *record);
    }
    check(it->status(), "rocksdb iterate state");
    return hasher.peek().hex();
}

std::optional<std::pair<Stamp, bool>> MetaStore::stamp_of(StatePart part, const std::string& repo,
                                                          const std::string& k) const {
    auto value = impl_->get(family_of(part), key(repo, k));
    if (!value) return std::nullopt;
    switch (part) {
        case StatePart::links: {
            auto r = decode_link(*value);
            return std::pair{r.stamp, r.deleted};
        }
        case StatePart::images:
        case StatePart::indexes: {
            auto r = decode_manifest(*value);
            return std::pair{r.stamp, r.deleted};
        }
        case StatePart::tags: {
            auto r = decode_tag(*value);
            return std::pair{r.stamp, r.deleted()};
        }
    }
    return std::nullopt;
}

std::uint64_t MetaStore::log_first() const {
    std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(rocksdb::ReadOptions(), impl_->cf(cf_log)));
    it->SeekToFirst();
    check(it->status(), "rocksdb iterate log");
    return it->Valid() ? sequence_of(it->key()) : log_head() + 1;
}

std::uint64_t MetaStore::log_written_before(std::uint64_t ms) const {
    std::lock_guard lock(impl_->commit_mutex);
    if (impl_->last_commit_ms < ms) return impl_->head;
    auto& times = impl_->log_times;
    // Callers ask for ever later moments: what lies before the newest mark
    // older than `ms` is never needed again.
    while (times.size() > 1 && times[1].first < ms) times.pop_front();
    return times.front().first < ms ? times.front().second : 0;
}

void MetaStore::compact_log(std::uint64_t through) {
    through = std::min(through, log_head());
    const auto first = sequence_key(0), end = sequence_key(through + 1);
    check(impl_->db->DeleteRange(rocksdb::WriteOptions(), impl_->cf(cf_log), first, end), "compact change log");
    const rocksdb::Slice begin_slice(first), end_slice(end);
    check(impl_->db->CompactRange(rocksdb::CompactRangeOptions(), impl_->cf(cf_log), &begin_slice, &end_slice),
          "compact change log files");
}

NamespaceUsage MetaStore::usage(const std::string& ns) const {
    auto value = impl_->get(cf_usage, usage_total_key(ns));
    return value ? decode_totals(*value) : NamespaceUsage{};
}

std::vector<std::pair<std::string, NamespaceUsage>> MetaStore::usages(const std::string& after,
                                                                      std::size_t limit) const {
    std::vector<std::pair<std::string, NamespaceUsage>> out;
    if (limit == 0) return out;
    const auto prefix = usage_total_key("");
    impl_->scan(cf_usage, prefix, after.empty() ? "" : usage_total_key(after),
                [&](std::string_view ns, std::string_view v) {
                    out.emplace_back(std::string(ns), decode_totals(v));
                    return out.size() < limit;
                });
    return out;
}

std::vector<UsageChange> MetaStore::usage_change(const Batch& batch) const {
    std::lock_guard lock(impl_->commit_mutex);
    return impl_->tally(*batch.impl_).changes();
}

void MetaStore::count_usage(const std::function<std::uint64_t(const std::string& digest)>& blob_size) {
    if (setting(layout::setting::usage_counted)) return;
    // Before anything serves, but under the commit lock all the same: the
    // count must see every link, and no commit may tally against half of it.
    std::lock_guard lock(impl_->commit_mutex);
    auto* usage = impl_->cf(cf_usage);
    rocksdb::WriteOptions options;
    // What an interrupted count left is counted again from nothing. Namespace
    // names and the totals' NUL sort below 0xff.
    check(impl_->db->DeleteRange(options, usage, "", "\xff"), "clear usage");
    auto tally = std::make_unique<UsageTally>([this](const std::string& k) { return impl_->get(cf_usage, k); });
    // In pieces of bounded size: a store may hold millions of links.
    auto flush = [&](bool last) {
        rocksdb::WriteBatch write;
        for (auto& [k, value] : tally->writes())
            check(value ? write.Put(usage, k, *value) : write.Delete(usage, k), "count usage");
        if (last) check(write.Put(impl_->cf(cf_settings), layout::setting::usage_counted, "1"), "count usage");
        check(impl_->db->Write(options, &write), "count usage");
        tally = std::make_unique<UsageTally>([this](const std::string& k) { return impl_->get(cf_usage, k); });
    };
    constexpr std::size_t piece = 10000;
    impl_->scan(cf_repos, "", "", [&](std::string_view repo, std::string_view) {
        tally->repository_added(repo);
        if (tally->size() >= piece) flush(false);
        return true;
    });
    impl_->scan(cf_links, "", "", [&](std::string_view k, std::string_view v) {
        if (decode_link(std::string(v)).deleted) return true;
        const auto nul = k.find('\0');
        const auto digest = std::string(k.substr(nul + 1));
        tally->link(k.substr(0, nul), digest, false, true, blob_size(digest));
        if (tally->size() >= piece) flush(false);
        return true;
    });
    flush(true);
    sync();
}

std::optional<std::string> MetaStore::setting(const std::string& k) const { return impl_->get(cf_settings, k); }

void MetaStore::put_setting(const std::string& k, const std::string& value) {
    rocksdb::WriteOptions options;
    options.sync = true;
    check(impl_->db->Put(options, impl_->cf(cf_settings), k, value), "put setting");
}

}  // namespace berth::storage
