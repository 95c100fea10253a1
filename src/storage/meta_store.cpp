#include "berth/storage/meta_store.hpp"
#include "berth/storage/hybrid_clock.hpp"
#include "berth/storage/layout.hpp"
#include "usage_tally.hpp"

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

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
    std::string out = json{{"t", r.media_type}, {"sub", r.subject}, {"ref", r.referrer_json},
                           {"s", stamp_json(r.stamp)}, {"del", r.deleted}}
                          .dump();
    out += '\0';
    out += r.bytes;
    return out;
}
ManifestRecord decode_manifest(const std::string& v) {
    auto nul = v.find('\0');
    auto j = json::parse(v.substr(0, nul));
    ManifestRecord r{j.at("t").get<std::string>(), j.at("sub").get<std::string>(),
                     j.at("ref").get<std::string>(), v.substr(nul + 1), stamp_of(j.at("s")),
                     j.at("del").get<bool>()};
    return r;
}

std::string encode(const LinkRecord& r) { return json{{"s", stamp_json(r.stamp)}, {"del", r.deleted}}.dump(); }
LinkRecord decode_link(const std::string& v) {
    auto j = json::parse(v);
    return {stamp_of(j.at("s")), j.at("del").get<bool>()};
}

std::string encode(const UploadRecord& r) {
    return json{{"repo", r.repository}, {"alg", r.algorithm}}.dump();
}
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
    impl_->log({Event::Type::manifest_deleted, repo, digest, {}, stamp});
}
void MetaStore::Batch::record_tag(const std::string& repo, const std::string& tag, const std::string& digest,
                                  const Stamp& stamp) {
    impl_->ops.push_back({cf_tags, key(repo, tag), encode(TagRecord{digest, stamp})});
    impl_->log({digest.empty() ? Event::Type::tag_deleted : Event::Type::tag, repo, digest, tag, stamp});
}
void MetaStore::Batch::record_link(const std::string& repo, const std::string& digest, const Stamp& stamp,
                                   bool deleted, std::uint64_t size) {
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
class RecordCache {
public:
    template <typename Map, typename Load, typename Record = typename Map::mapped_type>
    std::optional<Record> get(Map& map, const std::string& key, Load load, std::size_t (*cost)(const Record&)) {
        std::uint64_t generation;
        {
            std::lock_guard lock(mutex_);
            if (auto it = map.find(key); it != map.end()) return it->second;
            generation = generation_;
        }
        auto loaded = load();
        if (!loaded) return loaded;
        std::lock_guard lock(mutex_);
        if (generation == generation_) {
            bytes_ += cost(*loaded) + key.size();
            if (bytes_ > limit) {  // simple and bounded: start over
                manifests.clear();
                tags.clear();
                tag_pages.clear();
                bytes_ = cost(*loaded) + key.size();
            }
            map.emplace(key, *loaded);
        }
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
                tag_pages.erase(tag_pages.lower_bound(repo + '\0'), tag_pages.lower_bound(repo + '\1'));
            }
        }
    }

    static constexpr std::size_t limit = 32 << 20;
    std::unordered_map<std::string, ManifestRecord> manifests;
    std::unordered_map<std::string, TagRecord> tags;
    std::map<std::string, std::vector<std::string>> tag_pages;

private:
    std::mutex mutex_;
    std::uint64_t generation_ = 0;
    std::size_t bytes_ = 0;
};

std::size_t manifest_cost(const ManifestRecord& r) { return r.bytes.size() + r.referrer_json.size() + 128; }
std::size_t tag_cost(const TagRecord& r) { return r.digest.size() + 64; }
std::size_t page_cost(const std::vector<std::string>& page) {
    std::size_t bytes = 64;
    for (auto& tag : page) bytes += tag.size() + sizeof(std::string);
    return bytes;
}

struct MetaStore::Impl {
    std::unique_ptr<rocksdb::DB> db;
    RecordCache cache;
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
        if (!cf(f)) return std::nullopt;  // see the read-only open
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

MetaStore::MetaStore(const std::filesystem::path& dir, Mode mode) : impl_(std::make_unique<Impl>()) {
    if (mode == Mode::read_write) std::filesystem::create_directories(dir);
    rocksdb::DBOptions options;
    options.create_if_missing = true;
    options.create_missing_column_families = true;
    options.max_background_jobs = 2;
    options.keep_log_file_num = 4;
    rocksdb::ColumnFamilyOptions family_options;
    family_options.write_buffer_size = 8 << 20;  // small memtables keep idle memory low
    std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
    for (auto name : column_families) descriptors.emplace_back(name, family_options);
    rocksdb::DB* db = nullptr;
    if (mode == Mode::read_only) {
        // Read-only cannot create a family a store from an older berth lacks
        // (usage); it opens without it, and reads of it find nothing.
        std::vector<std::string> existing;
        check(rocksdb::DB::ListColumnFamilies(options, dir.string(), &existing), "open metadata index read-only");
        std::erase_if(descriptors, [&](auto& d) {
            return std::find(existing.begin(), existing.end(), d.name) == existing.end();
        });
        std::vector<rocksdb::ColumnFamilyHandle*> opened;
        check(rocksdb::DB::OpenForReadOnly(options, dir.string(), descriptors, &opened, &db),
              "open metadata index read-only");
        impl_->families.assign(cf_count, nullptr);
        for (std::size_t f = 0, i = 0; f < cf_count; ++f)
            if (i < descriptors.size() && descriptors[i].name == column_families[f]) impl_->families[f] = opened[i++];
    } else {
        check(rocksdb::DB::Open(options, dir.string(), descriptors, &impl_->families, &db), "open metadata index");
    }
    impl_->db.reset(db);

    std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(rocksdb::ReadOptions(), impl_->cf(cf_log)));
    it->SeekToLast();
    if (it->Valid()) impl_->head = sequence_of(it->key());
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
    return impl_->cache.get(impl_->cache.manifests, k, [&]() -> std::optional<ManifestRecord> {
        auto value = impl_->get(cf_manifests, k);
        if (!value) return std::nullopt;
        return decode_manifest(*value);
    }, &manifest_cost);
}

std::optional<TagRecord> MetaStore::tag(const std::string& repo, const std::string& tag) const {
    const auto k = key(repo, tag);
    return impl_->cache.get(impl_->cache.tags, k, [&]() -> std::optional<TagRecord> {
        auto value = impl_->get(cf_tags, k);
        if (!value) return std::nullopt;
        return decode_tag(*value);
    }, &tag_cost);
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
    auto page = impl_->cache.get(impl_->cache.tag_pages, page_key, [&]() -> std::optional<std::vector<std::string>> {
        std::vector<std::string> out;
        const auto prefix = key(repo, "");
        impl_->scan(cf_tags, prefix, after.empty() ? "" : prefix + after, [&](std::string_view name, std::string_view v) {
            if (!tombstone(v)) out.emplace_back(name);
            return out.size() < limit;
        });
        return out;
    }, &page_cost);
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
    if (auto event = Event::parse(it->value().ToString())) stats.oldest_ms = HybridClock::physical_ms(event->stamp.clock);
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
