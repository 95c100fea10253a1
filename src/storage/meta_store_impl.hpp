#pragma once
// MetaStore's insides, shared by the files that implement it: meta_store.cpp (opening, commits,
// records), change_log.cpp, state_pages.cpp and usage_records.cpp.
#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/write_buffer_manager.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "berth/oci/manifest.hpp"
#include "berth/oci/media_types.hpp"
#include "berth/storage/hybrid_clock.hpp"
#include "berth/storage/layout.hpp"
#include "berth/storage/meta_store.hpp"
#include "group_sync.hpp"
#include "usage_tally.hpp"
#include "meta_codec.hpp"
#include "record_cache.hpp"

namespace berth::storage {

// The files of MetaStore (and only they include this) all speak in layout's names and the codec's.
using namespace layout;
using namespace meta;

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
    std::string cause, principal;  // Batch(cause, principal)

    void add_repository(const std::string& repo) { ops.push_back({cf_repos, repo, ""}); }
    void put_manifest(const std::string& repo, const std::string& digest, const ManifestRecord& r) {
        ops.push_back({cf_manifests, key(repo, digest), encode(r)});
    }
    void put_referrer(const std::string& repo, const std::string& subject, const std::string& digest,
                      std::optional<std::string> descriptor_json) {
        ops.push_back({cf_referrers, key(key(repo, subject), digest), std::move(descriptor_json)});
    }
    // lineage_records.cpp: a manifest's lineage entries, written (live) or dropped, and a tag's history.
    void put_lineage(const std::string& repo, const std::string& digest, const oci::ParsedManifest& parsed, bool live);
    void note_tag(const std::string& repo, const std::string& tag, const std::string& digest, std::uint64_t clock);
    void log(Event event) {
        add_repository(event.repo);
        event.cause = cause;
        event.principal = principal;
        events.push_back(event.json());
        logged.push_back(std::move(event));
    }
};

struct MetaStore::Impl {
    explicit Impl(std::size_t cache_bytes) : cache(cache_bytes) {}
    std::shared_ptr<rocksdb::WriteBufferManager> memtables;  // every column family's, one budget
    std::shared_ptr<rocksdb::Cache> block_cache;             // shared by every column family
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

    std::unique_ptr<GroupSync> group;  // the WAL's fsyncs (group_sync.hpp)

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
        // Tags and manifests written, each compared with what it replaces (earlier in this batch, or stored).
        std::map<std::pair<int, std::string>, bool> records;
        for (auto& op : batch.ops) {
            if ((op.family != cf_tags && op.family != cf_manifests) || !op.value) continue;
            const bool tag = op.family == cf_tags;
            auto live_record = [tag](std::string_view v) { return tag ? !tombstone(v) : manifest_header(v).live; };
            auto [it, first] = records.try_emplace({op.family, op.key}, false);
            if (first)
                if (auto value = get(op.family, op.key)) it->second = live_record(*value);
            const bool now = live_record(*op.value);
            const auto clock = !now ? 0 : tag ? decode_tag(*op.value).stamp.clock : manifest_header(*op.value).clock;
            const auto repo = std::string_view(op.key).substr(0, op.key.find('\0'));
            if (tag) tally.tag(repo, it->second, now, clock);
            else tally.manifest(repo, it->second, now, clock);
            it->second = now;
        }
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

}  // namespace berth::storage
