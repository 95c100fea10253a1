#pragma once
// "What is built on this base?": every image manifest whose layers begin with the layers of any
// version a base tag ever named, a page at a time, from the lineage index (storage/layout.hpp).
// Served as GET /_berth/v1/lineage and `berth lineage` (docs/policies.md).
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "berth/storage/meta_store.hpp"

namespace berth::registry {

struct LineageQuery {
    std::string repository, reference;      // the base: a tag, or a digest (one version)
    storage::MetaStore::ManifestRef after;  // the page starts after it ("": from the first)
    std::size_t limit = 100;
    std::function<bool(const std::string& repo)> may_pull;  // null: everything
};

struct Derived {
    std::string repository, digest;
    std::vector<std::string> tags;  // the repository's tags naming it now
    std::string base_digest;        // the version of the base it begins with (the longest, if several)
    bool current = false;           // that version is what the base reference names now
};

struct Lineage {
    std::string repository, reference;
    std::string digest;                 // what the reference names now ("" when the tag is gone)
    std::vector<std::string> versions;  // every digest the reference named here, oldest first
    std::vector<Derived> derived;
    std::optional<storage::MetaStore::ManifestRef> next;  // where the next page starts, if there is one
};

// Throws oci::Error(manifest_unknown) when the reference never named anything here.
Lineage lineage(const storage::MetaStore& meta, const LineageQuery& query);

// A page cursor as the `last` query parameter spells it: REPOSITORY@DIGEST.
std::string lineage_cursor(const storage::MetaStore::ManifestRef& ref);
std::optional<storage::MetaStore::ManifestRef> parse_lineage_cursor(const std::string& text);

}  // namespace berth::registry
