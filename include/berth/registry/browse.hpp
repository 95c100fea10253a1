#pragma once
// The web UI's views of a registry (docs/ui.md): JSON answers read from this replica's index as
// it stands, each one bounded page, showing only repositories `may_pull` allows. They read; they
// never fetch from an upstream or a peer, and never note a pull.
#include <cstddef>
#include <functional>
#include <string>

namespace berth::registry {

class Registry;
using MayPull = std::function<bool(const std::string& repo)>;  // null: everything

struct RepositoryListQuery {
    std::string search;  // a part of the name; "" for every repository
    std::string after;   // the page starts after this name
    std::size_t limit = 50;
    // How `next` is written when the reading stopped at a name the caller may not see (sealed);
    // null: as it is.
    std::function<std::string(const std::string& name)> hidden_cursor;
};

struct TagListQuery {
    std::string repository;
    std::string after;  // the page starts after this tag
    std::size_t limit = 100;
};

struct Browse {
    // At most this many names are read for one page of a search, so a search matching little in
    // millions of repositories answers in bounded time, with a `next` to read on from.
    static constexpr std::size_t max_names_read = 20000;
    static constexpr std::size_t max_layers = 500, max_history = 200, max_referrers = 200;
    static constexpr std::size_t max_config_bytes = 1 << 20, max_raw_bytes = 64 << 10;

    // Throws NAME_INVALID for a malformed name, NAME_UNKNOWN for one not stored here.
    static void require_repository(const Registry& registry, const std::string& repo);
    // {"repositories":[{"name","tags","manifests","bytes","last_push","last_pull"}],"next"}
    static std::string repositories(const Registry& registry, const RepositoryListQuery& query,
                                    const MayPull& may_pull);
    // {"name","tags_total","manifests","bytes","last_push","last_pull","mirrored","tags":[{"tag","digest",
    // "mediaType","size","pushed","last_pull","immutable","signature","signature_detail","platforms"}],"next"}.
    // Throws NAME_UNKNOWN.
    static std::string repository(Registry& registry, const TagListQuery& query);
    // A manifest by tag or digest: its parts, config, annotations, referrers, subject and base
    // (docs/ui.md). Throws NAME_UNKNOWN, MANIFEST_UNKNOWN.
    static std::string manifest(Registry& registry, const std::string& repository, const std::string& reference,
                                const MayPull& may_pull);
    // {"mirrors":[{"host","urls","hits","misses","stale","fetched_bytes","errors","reachable","last_error",
    // "repositories","repositories_more"}]}
    static std::string mirrors(const Registry& registry, const MayPull& may_pull);

private:
    struct View;  // what the views share, reading the registry's index as its friend
};

}  // namespace berth::registry
