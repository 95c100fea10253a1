// MetaStore's namespace usage: what each namespace's repositories hold, kept by every commit.
#include "berth/storage/meta_store.hpp"

#include "meta_store_impl.hpp"

namespace berth::storage {

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

RepositoryUsage MetaStore::repository_usage(const std::string& repo) const {
    auto value = impl_->get(cf_usage, usage_repository_key(repo));
    return value ? decode_repository_totals(*value) : RepositoryUsage{};
}

std::vector<UsageChange> MetaStore::usage_change(const Batch& batch) const {
    std::lock_guard lock(impl_->commit_mutex);
    return impl_->tally(*batch.impl_).changes();
}

void MetaStore::count_usage(const std::function<std::uint64_t(const std::string& digest)>& blob_size) {
    if (setting(layout::setting::usage_counted) == layout::usage_count_version) return;
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
        if (last)
            check(write.Put(impl_->cf(cf_settings), layout::setting::usage_counted, layout::usage_count_version),
                  "count usage");
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
    impl_->scan(cf_tags, "", "", [&](std::string_view k, std::string_view v) {
        if (tombstone(v)) return true;
        tally->tag(k.substr(0, k.find('\0')), false, true, decode_tag(v).stamp.clock);
        if (tally->size() >= piece) flush(false);
        return true;
    });
    impl_->scan(cf_manifests, "", "", [&](std::string_view k, std::string_view v) {
        const auto header = manifest_header(v);
        if (!header.live) return true;
        tally->manifest(k.substr(0, k.find('\0')), false, true, header.clock);
        if (tally->size() >= piece) flush(false);
        return true;
    });
    flush(true);
    sync();
}
}  // namespace berth::storage
