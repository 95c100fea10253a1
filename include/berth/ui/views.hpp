#pragma once
// The web UI's views (docs/ui.md): JSON answers read from the registry's contents as this replica
// holds them (registry/contents.hpp), each one bounded page, showing only repositories `may_pull`
// allows. They read; they never fetch from an upstream or a peer, and never note a pull. Every
// string comes out through nlohmann's encoder, invalid UTF-8 replaced: manifests, configs and
// annotations are the pushers' words, and the browser shows them as text.
#include <cstddef>
#include <functional>
#include <optional>
#include <string>

#include "berth/registry/contents.hpp"

namespace berth::registry {
class Retention;
}
namespace berth::replication {
class PeerService;
}
namespace berth::storage {
class BackupJob;
struct LogStats;
}  // namespace berth::storage

namespace berth::ui {

using registry::MayPull;

// At most this many names are read for one page of a search, so a search matching little in
// millions of repositories answers in bounded time, with a `next` to read on from.
inline constexpr std::size_t max_names_read = 20000;
inline constexpr std::size_t max_layers = 500, max_history = 200, max_referrers = 200;
inline constexpr std::size_t max_config_bytes = 1 << 20, max_raw_bytes = 64 << 10;

// {"user","auth","registry"}: who is signed in, whether anyone must, what pull commands name.
std::string whoami_json(const std::optional<std::string>& user, bool auth, const std::string& registry_host);

struct RepositoryListQuery {
    std::string search;  // a part of the name; "" for every repository
    std::string after;   // the page starts after this name
    std::size_t limit = 50;
    // How `next` is written when the reading stopped at a name the caller may not see (sealed);
    // null: as it is.
    std::function<std::string(const std::string& name)> hidden_cursor;
};
// {"repositories":[{"name","tags","manifests","bytes","last_push","last_pull"}],"next"}
std::string repositories_json(const registry::Contents& contents, const RepositoryListQuery& query,
                              const MayPull& may_pull);

struct TagListQuery {
    std::string repository;
    std::string after;  // the page starts after this tag
    std::size_t limit = 100;
};
// {"name","tags_total","manifests","bytes","last_push","last_pull","mirrored","tags":[{"tag","digest",
// "mediaType","size","pushed","last_pull","immutable","signature","signature_detail","platforms"}],"next"}.
// Throws NAME_UNKNOWN.
std::string repository_json(const registry::Contents& contents, const TagListQuery& query);

// A manifest by tag or digest: its parts, config, annotations, referrers, subject and base
// (docs/ui.md). Throws NAME_UNKNOWN, MANIFEST_UNKNOWN.
std::string manifest_json(const registry::Contents& contents, const std::string& repository,
                          const std::string& reference, const MayPull& may_pull);

// {"mirrors":[{"host","urls","hits","misses","stale","fetched_bytes","errors","reachable","last_error",
// "repositories","repositories_more"}]}
std::string mirrors_json(const registry::Contents& contents, const MayPull& may_pull);

// {"repository","policy","deletions":[{"kind","reference","reason"}]}: what retention would delete
// now (retention null: no policies here).
std::string retention_json(registry::Retention* retention, const std::string& repository);

// {"self","replicas":[...],"problems":[...]}: every replica as it says it is (the peer API's status,
// as replication last heard it), this one's change log and backups, and what is wrong, in plain
// words. self_id: this replica's id; peers and backups may be null.
std::string cluster_json(const std::string& self_id, const storage::LogStats& change_log,
                         const replication::PeerService* peers, const storage::BackupJob* backups);

}  // namespace berth::ui
