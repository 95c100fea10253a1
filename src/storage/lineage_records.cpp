// The lineage column family (layout.hpp): chains of layer digests, indexes' children and tags'
// history, so that "what begins with these layers?" is a prefix seek, not a scan.
#include <algorithm>

#include "meta_store_impl.hpp"

namespace berth::storage {

namespace {

// chain_i = the first half of SHA-256(chain_{i-1} || layer i), in hex: one fixed-size key part
// however many layers, and equal chains mean equal layer lists (the callers that rely on it
// compare the layers themselves too).
std::vector<std::string> chains(const std::vector<std::string>& layers) {
    std::vector<std::string> out;
    out.reserve(layers.size());
    std::string previous;
    for (auto& layer : layers) {
        previous = oci::Digest::of(oci::DigestAlgorithm::sha256, previous + layer).hex().substr(0, 32);
        out.push_back(previous);
    }
    return out;
}

// The (repo, digest) at the end of a chain key, after its kind and chain.
MetaStore::ManifestRef chain_ref(std::string_view rest) {
    const auto nul = rest.find('\0');
    return {std::string(rest.substr(0, nul)), std::string(rest.substr(nul + 1))};
}

// The last part of a key of NUL-separated parts.
std::string last_part(std::string_view k) { return std::string(k.substr(k.rfind('\0') + 1)); }

}  // namespace

void MetaStore::Batch::Impl::put_lineage(const std::string& repo, const std::string& digest,
                                         const oci::ParsedManifest& parsed, bool live) {
    auto value = live ? std::optional<std::string>("") : std::nullopt;
    if (parsed.kind == oci::ManifestKind::index) {
        for (auto& child : parsed.manifests)
            ops.push_back({cf_lineage, lineage_key::index(repo, child.digest.str(), digest), value});
        return;
    }
    if (parsed.kind != oci::ManifestKind::image || parsed.layers.empty()) return;
    auto chain = chains(parsed.layer_digests());
    for (auto& c : chain) ops.push_back({cf_lineage, lineage_key::chain('p', c, repo, digest), value});
    ops.push_back({cf_lineage, lineage_key::chain('c', chain.back(), repo, digest), value});
}

void MetaStore::Batch::Impl::note_tag(const std::string& repo, const std::string& tag, const std::string& digest,
                                      std::uint64_t clock) {
    ops.push_back({cf_lineage, lineage_key::history(repo, tag, digest), std::to_string(clock)});
    ops.push_back({cf_lineage, lineage_key::tagged(repo, digest, tag), ""});
}

std::vector<MetaStore::ManifestRef> MetaStore::with_layers(const std::vector<std::string>& layers,
                                                           std::size_t limit) const {
    std::vector<ManifestRef> out;
    if (layers.empty() || limit == 0) return out;
    impl_->scan(cf_lineage, std::string(1, 'c') + chains(layers).back(), "", [&](std::string_view rest, auto) {
        out.push_back(chain_ref(rest));
        return out.size() < limit;
    });
    return out;
}

std::vector<std::pair<std::size_t, MetaStore::ManifestRef>> MetaStore::bases_of(const std::vector<std::string>& layers,
                                                                                std::size_t max_length,
                                                                                std::size_t per_length) const {
    std::vector<std::pair<std::size_t, ManifestRef>> out;
    const auto longest = std::min(layers.size() ? layers.size() - 1 : 0, max_length);
    if (longest == 0 || per_length == 0 || !impl_->cf(cf_lineage)) return out;
    const auto chain = chains({layers.begin(), layers.begin() + static_cast<std::ptrdiff_t>(longest)});
    std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(rocksdb::ReadOptions(), impl_->cf(cf_lineage)));
    for (auto n = longest; n >= 1; --n) {
        const auto prefix = std::string(1, 'c') + chain[n - 1];
        std::size_t found = 0;
        for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix) && found < per_length; it->Next(), ++found)
            out.emplace_back(n, chain_ref(it->key().ToStringView().substr(prefix.size())));
    }
    check(it->status(), "rocksdb iterate");
    return out;
}

std::vector<MetaStore::ManifestRef> MetaStore::built_on(const std::vector<std::string>& layers,
                                                        const ManifestRef& after, std::size_t limit) const {
    std::vector<ManifestRef> out;
    if (layers.empty() || limit == 0) return out;
    const auto chain = chains(layers).back();
    const auto start = after.repo.empty() ? std::string() : lineage_key::chain('p', chain, after.repo, after.digest);
    impl_->scan(cf_lineage, std::string(1, 'p') + chain, start, [&](std::string_view rest, auto) {
        out.push_back(chain_ref(rest));
        return out.size() < limit;
    });
    return out;
}

std::vector<std::string> MetaStore::indexes_listing(const std::string& repo, const std::string& child) const {
    std::vector<std::string> out;
    impl_->scan(cf_lineage, lineage_key::index(repo, child, ""), "", [&](std::string_view index, auto) {
        out.emplace_back(index);
        return out.size() < 1000;
    });
    return out;
}

std::optional<std::uint64_t> MetaStore::tag_named_at(const std::string& repo, const std::string& tag,
                                                     const std::string& digest) const {
    auto clock = impl_->get(cf_lineage, lineage_key::history(repo, tag, digest));
    if (!clock) return std::nullopt;
    return std::stoull(*clock);
}

std::vector<std::string> MetaStore::tag_history(const std::string& repo, const std::string& tag) const {
    std::vector<std::pair<std::uint64_t, std::string>> named;
    impl_->scan(cf_lineage, lineage_key::history(repo, tag, ""), "", [&](std::string_view digest, auto clock) {
        named.emplace_back(std::stoull(std::string(clock)), std::string(digest));
        return true;
    });
    std::sort(named.begin(), named.end());
    std::vector<std::string> out;
    for (auto& [clock, digest] : named) out.push_back(std::move(digest));
    return out;
}

std::vector<std::string> MetaStore::tags_ever(const std::string& repo, const std::string& digest) const {
    std::vector<std::string> out;
    impl_->scan(cf_lineage, lineage_key::tagged(repo, digest, ""), "", [&](std::string_view tag, auto) {
        out.emplace_back(tag);
        return true;
    });
    return out;
}

void MetaStore::visit_tag_history(const std::string& repo_prefix,
                                  const std::function<bool(const std::string& repo, const std::string& tag,
                                                           const std::string& digest)>& visit) const {
    impl_->scan(cf_lineage, std::string(1, 'h') + repo_prefix, "", [&](std::string_view rest, auto) {
        const auto first = rest.find('\0');
        const auto second = rest.find('\0', first + 1);
        return visit(repo_prefix + std::string(rest.substr(0, first)),
                     std::string(rest.substr(first + 1, second - first - 1)), last_part(rest));
    });
}

void MetaStore::index_lineage() {
    if (setting(layout::setting::lineage_indexed) == "1") return;
    // Before anything serves; what an interrupted run wrote is written again, the same.
    constexpr std::size_t piece = 10000;
    Batch batch;
    auto flush = [&](bool last) {
        rocksdb::WriteBatch write;
        for (auto& op : batch.impl_->ops)
            check(op.value ? write.Put(impl_->cf(op.family), op.key, *op.value)
                           : write.Delete(impl_->cf(op.family), op.key),
                  "index lineage");
        if (last) check(write.Put(impl_->cf(cf_settings), layout::setting::lineage_indexed, "1"), "index lineage");
        check(impl_->db->Write(rocksdb::WriteOptions(), &write), "index lineage");
        batch.impl_->ops.clear();
    };
    impl_->scan(cf_manifests, "", "", [&](std::string_view k, std::string_view v) {
        auto record = decode_manifest(std::string(v));
        if (record.deleted) return true;
        const auto nul = k.find('\0');
        try {
            batch.impl_->put_lineage(std::string(k.substr(0, nul)), std::string(k.substr(nul + 1)),
                                     oci::parse_manifest(record.bytes, record.media_type), true);
        } catch (const std::exception&) {
            // Not a manifest berth would store today: nothing to index.
        }
        if (batch.impl_->ops.size() >= piece) flush(false);
        return true;
    });
    impl_->scan(cf_tags, "", "", [&](std::string_view k, std::string_view v) {
        auto record = decode_tag(v);
        const auto nul = k.find('\0');
        if (!record.digest.empty())
            batch.impl_->note_tag(std::string(k.substr(0, nul)), std::string(k.substr(nul + 1)), record.digest,
                                  record.stamp.clock);
        if (batch.impl_->ops.size() >= piece) flush(false);
        return true;
    });
    flush(true);
    sync();
}

}  // namespace berth::storage
