#pragma once
// What a set of link and repository writes does to namespace usage (the
// `usage` column family, layout.hpp): the records to write in the same
// WriteBatch, and each namespace's totals before and after. It reads the
// usage records as they stand through `read`, so the caller must keep other
// writers out between reading and writing (MetaStore's commit mutex).
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "berth/storage/records.hpp"

namespace berth::storage {

class UsageTally {
public:
    // A usage record by key, or nullopt.
    using Read = std::function<std::optional<std::string>(const std::string& key)>;
    explicit UsageTally(Read read) : read_(std::move(read)) {}

    // repo's link to digest goes from live (`was`) to live (`now`) or back.
    // size: the blob's bytes, counted when the namespace's first live link to
    // it appears; its last link going takes away what was counted then.
    void link(std::string_view repo, std::string_view digest, bool was, bool now, std::uint64_t size);
    // A repository record appears.
    void repository_added(std::string_view repo);
    // A tag or a manifest of repo goes from live (`was`) to live (`now`) or back; one written live
    // at `clock` is the repository's last push when it is the newest.
    void tag(std::string_view repo, bool was, bool now, std::uint64_t clock);
    void manifest(std::string_view repo, bool was, bool now, std::uint64_t clock);

    // Every namespace touched, in name order.
    std::vector<UsageChange> changes() const;
    // The usage records to write: key and value, nullopt to delete.
    std::vector<std::pair<std::string, std::optional<std::string>>> writes() const;
    // Usage records touched so far (bounds a recount's batch).
    std::size_t size() const { return blobs_.size() + totals_.size() + repositories_.size(); }

private:
    struct BlobEntry {
        std::uint64_t links = 0;
        std::uint64_t bytes = 0;
    };
    struct Totals {
        NamespaceUsage before, after;
    };
    BlobEntry& blob(std::string_view ns, std::string_view digest);
    Totals& totals(std::string_view ns);
    struct RepositoryTotals {
        RepositoryUsage before, after;
    };
    RepositoryTotals& repository(std::string_view repo);

    Read read_;
    std::map<std::string, BlobEntry> blobs_;                // by usage key, as they will be
    std::map<std::string, Totals> totals_;                  // by namespace
    std::map<std::string, RepositoryTotals> repositories_;  // by repository
};

// A namespace's totals record, and a repository's.
NamespaceUsage decode_totals(std::string_view value);
RepositoryUsage decode_repository_totals(std::string_view value);

}  // namespace berth::storage
