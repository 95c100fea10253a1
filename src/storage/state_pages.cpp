// MetaStore's whole state in pages and hashes of ranges, for a bootstrapping replica.
#include "berth/storage/meta_store.hpp"

#include "meta_store_impl.hpp"

namespace berth::storage {

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
}  // namespace berth::storage
