#include "berth/storage/meta_store.hpp"

#include <rocksdb/cache.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <rocksdb/write_buffer_manager.h>

#include "meta_store_impl.hpp"

namespace berth::storage {

MetaStore::Batch::Batch() : impl_(std::make_unique<Impl>()) {}
MetaStore::Batch::Batch(std::string cause, std::string principal) : impl_(std::make_unique<Impl>()) {
    impl_->cause = std::move(cause);
    impl_->principal = std::move(principal);
}
MetaStore::Batch::~Batch() = default;
MetaStore::Batch::Batch(Batch&&) noexcept = default;

void MetaStore::Batch::record_manifest(const std::string& repo, const oci::Digest& digest,
                                       const oci::ParsedManifest& parsed, std::string bytes, const Stamp& stamp) {
    const auto digest_text = digest.str();
    ManifestRecord record{parsed.media_type, {}, {}, std::move(bytes), stamp, false, stamp.clock};
    if (parsed.subject) {
        record.subject = parsed.subject->digest.str();
        record.referrer_json = oci::referrer_descriptor_json(parsed, digest, record.bytes.size());
        impl_->put_referrer(repo, record.subject, digest_text, record.referrer_json);
    }
    impl_->put_lineage(repo, digest_text, parsed, true);
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
        tombstone.pushed = current->deleted ? current->pushed : current->stamp.clock;
        tombstone.media_type = current->media_type;
        tombstone.subject = current->subject;
        if (!current->subject.empty()) impl_->put_referrer(repo, current->subject, digest, std::nullopt);
        if (!current->deleted) {
            try {
                impl_->put_lineage(repo, digest, oci::parse_manifest(current->bytes, current->media_type), false);
            } catch (const std::exception&) {
                // Stored bytes were parsed when stored: nothing of a manifest no longer parsable was indexed.
            }
        }
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
    else impl_->note_tag(repo, tag, digest, stamp.clock);
    impl_->log({digest.empty() ? Event::Type::tag_deleted : Event::Type::tag, repo, digest, tag, stamp});
}
void MetaStore::Batch::record_overtaken_manifest(const std::string& repo, const std::string& digest,
                                                 const ManifestRecord& tombstone, const Stamp& push) {
    auto record = tombstone;
    record.pushed = push.clock;
    impl_->put_manifest(repo, digest, record);
    impl_->log({Event::Type::manifest, repo, digest, {}, push});
}
void MetaStore::Batch::record_overtaken_tag(const std::string& repo, const std::string& tag, const std::string& digest,
                                            const Stamp& stamp) {
    impl_->note_tag(repo, tag, digest, stamp.clock);
    impl_->log({Event::Type::tag, repo, digest, tag, stamp});
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
    impl_->memtables = std::make_shared<rocksdb::WriteBufferManager>(32 << 20);
    options.write_buffer_manager = impl_->memtables;
    rocksdb::BlockBasedTableOptions table_options;
    impl_->block_cache = rocksdb::NewLRUCache(32 << 20);
    table_options.block_cache = impl_->block_cache;
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
    // Beside a running berth, whose compactions delete table files: every one is opened now, so
    // a file deleted later stays readable through its descriptor.
    if (mode == Mode::read_only) options.max_open_files = -1;
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
    impl_->group = std::make_unique<GroupSync>([db] { return db->GetLatestSequenceNumber(); },
                                               [db] {
                                                   auto status = db->SyncWAL();
                                                   return status.ok() ? std::string() : status.ToString();
                                               });
    impl_->families.assign(cf_count, nullptr);
    for (std::size_t i = 0; i < opened.size(); ++i) impl_->families[opened[i]] = handles[i];

    std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(rocksdb::ReadOptions(), impl_->cf(cf_log)));
    it->SeekToLast();
    if (it->Valid()) impl_->head = sequence_of(it->key());
    impl_->last_commit_ms = wall_ms();
    impl_->log_times.emplace_back(impl_->last_commit_ms, impl_->head);
}

IndexMemory MetaStore::memory() const {
    IndexMemory memory;
    memory.record_cache = impl_->cache.bytes();
    memory.memtables = impl_->memtables->memory_usage();
    memory.block_cache = impl_->block_cache->GetUsage();
    impl_->db->GetAggregatedIntProperty("rocksdb.estimate-table-readers-mem", &memory.table_readers);
    return memory;
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

void MetaStore::sync() { impl_->group->sync(); }

std::uint64_t MetaStore::wal_syncs() const { return impl_->group->syncs(); }

std::unique_lock<std::mutex> MetaStore::lock_writes() { return std::unique_lock(impl_->write_mutex); }

std::optional<ManifestRecord> MetaStore::manifest(const std::string& repo, const std::string& digest,
                                                  CacheUse use) const {
    const auto k = key(repo, digest);
    return impl_->cache.get(
        impl_->cache.manifests, k,
        [&]() -> std::optional<ManifestRecord> {
            auto value = impl_->get(cf_manifests, k);
            if (!value) return std::nullopt;
            return decode_manifest(*value);
        },
        &manifest_cost, use == CacheUse::fill);
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

void MetaStore::visit_referrers(const std::string& repo, const std::string& subject,
                                const std::function<bool(std::string_view descriptor)>& visit) const {
    impl_->scan(cf_referrers, key(key(repo, subject), ""), "",
                [&](std::string_view, std::string_view v) { return visit(v); });
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

std::optional<std::string> MetaStore::setting(const std::string& k) const { return impl_->get(cf_settings, k); }

void MetaStore::put_setting(const std::string& k, const std::string& value, Durability durability) {
    rocksdb::WriteOptions options;
    options.sync = durability == Durability::now;
    check(impl_->db->Put(options, impl_->cf(cf_settings), k, value), "put setting");
}

}  // namespace berth::storage
