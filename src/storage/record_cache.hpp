#pragma once
#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "berth/storage/layout.hpp"
#include "berth/storage/records.hpp"

namespace berth::storage {

// Part of MetaStore (meta_store_impl.hpp), in layout's names.
using namespace layout;

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
    std::size_t old_bytes = 0;  // at most: entries erased from the old half are not subtracted

    template <typename Key>
    void erase(const Key& key) {
        young.erase(key);
        old.erase(key);
    }
    void clear() {
        young.clear();
        old.clear();
        young_bytes = old_bytes = 0;
    }
};

class RecordCache {
public:
    explicit RecordCache(std::size_t budget)
        : manifests_limit_(budget / 2), tags_limit_(budget / 4), pages_limit_(budget / 4) {}

    template <typename Map, typename Load, typename Record = typename Map::mapped_type>
    std::optional<Record> get(Halves<Map>& halves, const std::string& key, Load load,
                              std::size_t (*cost)(const Record&), bool fill = true) {
        const auto limit = limit_of(halves);
        std::uint64_t generation;
        {
            std::lock_guard lock(mutex_);
            if (auto it = halves.young.find(key); it != halves.young.end()) return it->second;
            if (auto it = halves.old.find(key); it != halves.old.end()) {
                Record record = std::move(it->second);
                halves.old.erase(it);
                const auto bytes = cost(record) + key.size();
                halves.old_bytes -= std::min(halves.old_bytes, bytes);
                insert(halves, key, record, bytes, limit);
                return record;
            }
            generation = generation_;
        }
        auto loaded = load();
        if (!loaded) return loaded;
        std::lock_guard lock(mutex_);
        if (fill && generation == generation_) insert(halves, key, *loaded, cost(*loaded) + key.size(), limit);
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

    // What the cache holds, by its own accounting (an upper bound, never above the budget).
    std::size_t bytes() {
        std::lock_guard lock(mutex_);
        return manifests.young_bytes + manifests.old_bytes + tags.young_bytes + tags.old_bytes + tag_pages.young_bytes +
               tag_pages.old_bytes;
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
            halves.old_bytes = halves.young_bytes;
            halves.young_bytes = 0;
        }
        halves.young.insert_or_assign(key, record);
        halves.young_bytes += bytes;
    }

    const std::size_t manifests_limit_, tags_limit_, pages_limit_;
    std::mutex mutex_;
    std::uint64_t generation_ = 0;
};

inline std::size_t manifest_cost(const ManifestRecord& r) { return r.bytes.size() + r.referrer_json.size() + 128; }
inline std::size_t tag_cost(const TagRecord& r) { return r.digest.size() + 64; }
inline std::size_t page_cost(const std::vector<std::string>& page) {
    std::size_t bytes = 64;
    for (auto& tag : page) bytes += tag.size() + sizeof(std::string);
    return bytes;
}

}  // namespace berth::storage
