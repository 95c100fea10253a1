// MetaStore's change log: reading it, its size and age, and compacting it.
#include "berth/storage/meta_store.hpp"

#include "meta_store_impl.hpp"

namespace berth::storage {

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

std::map<std::string, std::uint64_t> MetaStore::log_compacted() const {
    auto text = setting(layout::setting::log_compacted);
    return text ? decode_clocks(*text) : std::map<std::string, std::uint64_t>{};
}

void MetaStore::compact_log(std::uint64_t through) {
    through = std::min(through, log_head());
    // Noted before the entries go, so a crash in between only over-states what was dropped.
    auto compacted = log_compacted();
    const auto before = compacted;
    for (auto after = log_first() - 1; after < through;) {
        auto entries = read_log(after, std::min<std::uint64_t>(4096, through - after));
        if (entries.empty()) break;
        for (auto& entry : entries)
            if (auto event = Event::parse(entry.event)) {
                auto& clock = compacted[event->stamp.replica];
                clock = std::max(clock, event->stamp.clock);
            }
        after = entries.back().sequence;
    }
    if (compacted != before) put_setting(layout::setting::log_compacted, encode_clocks(compacted));
    const auto first = sequence_key(0), end = sequence_key(through + 1);
    check(impl_->db->DeleteRange(rocksdb::WriteOptions(), impl_->cf(cf_log), first, end), "compact change log");
    const rocksdb::Slice begin_slice(first), end_slice(end);
    check(impl_->db->CompactRange(rocksdb::CompactRangeOptions(), impl_->cf(cf_log), &begin_slice, &end_slice),
          "compact change log files");
}
}  // namespace berth::storage
