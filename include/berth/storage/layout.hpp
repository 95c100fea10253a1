#pragma once
// Everything berth keeps on disk, in one place. Nothing else spells a folder,
// a file name, a column family or a settings key; change the layout here.
//
// <root>/                                  config `root`
//   blobs/<alg>/<2 hex>/<hex>              a blob's bytes, immutable once renamed into place
//                                          (fsync of the file, rename, fsync of the folder); every
//                                          <alg>/<2 hex> folder is made, durably, by the store's
//                                          owner at start (blob_store.hpp: StoreUse)
//   uploads/                               scratch files, all on the blobs' file system so a
//                                          commit is a rename; emptied of litter at start-up
//     <upload id>                          an upload session's bytes so far (registry/upload_id.hpp),
//                                          made by its first append
//     fetch-<16 hex>                       a blob being copied from a peer, committed once its
//                                          digest is verified
//   blobs.moved-<UTC time>/                blobs/ set aside, whole, once a bucket held every blob
//                                          (berth migrate --to-s3); never removed by berth
//   quarantine/<alg>-<hex>                 a blob whose bytes scrub found not to match its digest
//   notifications/<endpoint>.dead          events that could not reach an endpoint within its max_age,
//                                          one CloudEvent (JSON) per line, the newest last; moved to
//                                          <endpoint>.dead.1 (replacing it) at 16 MiB
//   replica-addresses.json                 the node agent's: {"<replica URL>":["<IP>:<port>",...]}, the
//                                          addresses its replicas' name last resolved to, tried when
//                                          the name has no answer (a cold cluster start, DNS not up)
//   issuer-keys/<16 hex>.json              the last key set fetched from a trusted issuer's discovery
//                                          (auth.oidc discovery_url), by a hash of its issuer URL:
//                                          used while the issuer is out of reach, restarts included
//   meta/                                  the RocksDB metadata index (MetaStore), column families:
//     default    settings: key -> value    replica_id             this replica's id, kept from the
//                                                                 first start when not configured
//                                          log_epoch              16 hex, new with every empty index:
//                                                                 a peer seeing it change starts over
//                                          cursor/<peer id>       "<peer's epoch>:<last applied seq>"
//                                          bootstrap/<peer id>    a bootstrap from that peer under way:
//                                                                 {"epoch","since","part","after" (hex),
//                                                                  "incremental"}, gone once it is done
//                                          peer_cursors           {"<peer id>": last sequence it read of
//                                                                 this replica's log}: compaction keeps
//                                                                 the entries after it
//                                          claim/<repo>\0<tag>    the digest this replica promised for a new
//                                                                 immutable tag (docs/ha.md), forever
//                                          usage_counted          "2" once `usage` accounts for every link,
//                                                                 repository, tag and manifest (a store from
//                                                                 before it, or counted as "1" without
//                                                                 repositories' totals, is counted at start-up)
//                                          peer_addresses         "<HOST:PORT>\n..." the replicas this one was
//                                                                 configured with, for `berth restore` to see
//                                                                 whether any of them still runs
//                                          notify/<endpoint>      how far events reached an endpoint, replicated
//                                                                 among replicas by merging (notify/progress.hpp):
//                                                                 {"g":replay generation,"f":floor clock,
//                                                                  "o":{"<origin>":clock},"d":disabled at,
//                                                                  "dr":why,"e":enabled at}
//                                          notify-scan/<endpoint> this replica's own: the log sequence before
//                                                                 which every entry has reached the endpoint
//                                          log_compacted          {"<origin>":clock}: per origin replica, the
//                                                                 newest change compaction took from the log
//                                                                 (a poller of /_berth/v1/events whose cursor
//                                                                 is behind it missed events: 410)
//                                          cursor_key             64 hex: a lone replica's key for sealing paging
//                                                                 cursors (replicas derive theirs from the
//                                                                 cluster's secret)
//                                          lineage_indexed        "1" once `lineage` holds every manifest and
//                                                                 tag (a store from before it is indexed at
//                                                                 start-up)
//                                          bucket_backup_taken    Unix seconds: restored from a backup of a
//                                                                 store in a bucket taken then; objects newer
//                                                                 (another index's) are never collected here
//     repos      <repo> -> ""
//     manifests  <repo>\0<digest> -> {"t":media type,"sub":subject digest,"ref":referrer descriptor,
//                                     "s":stamp,"del":tombstone}\0<the manifest's bytes, untouched>
//     tags       <repo>\0<tag> -> {"d":digest ("" for a tombstone),"s":stamp}
//     links      <repo>\0<digest> -> {"s":stamp,"del":tombstone}       a repository's claim on a blob
//     referrers  <repo>\0<subject>\0<digest> -> the referrer's descriptor JSON
//     uploads    <upload id> -> {"repo":repository,"alg":digest algorithm}   once an append to
//                the session was acknowledged (a PATCH's 202): a session without is not kept
//     log        <sequence, 8 bytes big-endian> -> an event (storage/events.hpp) as JSON
//     pulls      <repo>\0<tag or digest> -> when this replica last served it to a client, ms since
//                the epoch rounded up to the hour, 8 bytes big-endian (PullTimes). Per replica, not
//                logged or replicated; a tag's or manifest's tombstone drops its entry.
//                <repo>\0 (no name) -> the same for anything of the repository (the web UI's last pull)
//     usage      per namespace (a repository name up to its first '/'), kept by every commit that
//                writes links or repositories, in the same WriteBatch, for every namespace:
//                \0<namespace> -> {"b":bytes,"r":repositories}   its totals: the bytes of the distinct
//                                                                blobs linked, its repositories (the
//                                                                leading NUL keeps the totals together)
//                <namespace>\0<digest> -> {"n":live links,"b":the blob's bytes}   a blob the namespace
//                                                                links, counted once in the totals
//                \1<repo> -> {"b":bytes,"t":tags,"m":manifests,"p":last push}   a repository's totals (the
//                                                                web UI's listings): the bytes of the blobs it
//                                                                links, its live tags and manifests, the hybrid
//                                                                clock of the newest tag or manifest write
//     lineage    what each manifest is built on and what each tag ever named (registry/lineage.hpp),
//                written by the batches that write manifests and tags (so replicas keep it too):
//                c<chain><repo>\0<digest> -> ""        a live image manifest whose whole layer list
//                                                      hashes to <chain>
//                p<chain><repo>\0<digest> -> ""        one per layer: its first i layers hash to <chain>
//                i<repo>\0<child>\0<index> -> ""       a live index lists child
//                h<repo>\0<tag>\0<digest> -> <clock>   the tag named digest (last set to it at that hybrid clock,
//                                                      decimal); kept when the tag moves or goes: the
//                                                      tag's history on this replica since it held it
//                d<repo>\0<digest>\0<tag> -> ""        the same by digest
//                where <chain> is 32 hex: chain_i = the first half of SHA-256(chain_{i-1} || layer i's
//                digest), chain_0 = "". A manifest's tombstone drops its c, p and i entries
//   where a stamp is {"c": hybrid clock value, "r": replica id}. Names, tags and
//   digests never hold NUL, so it separates key parts and keeps each
//   repository's keys together.
//
// A backup target (`berth backup`, storage/backup.hpp, docs/backup.md): content-addressed, its
// blob files shared by every backup in it, so an incremental backup copies only new blobs.
//
// <target>/
//   blobs/<alg>/<2 hex>/<hex>              a blob file, hard-linked from the store (same file system)
//                                          or copied and verified; named by its digest
//   backups/<id>/                          one backup; id: its UTC time, YYYYMMDDTHHMMSSZ
//     meta/                                the index (every column family) at one moment: a RocksDB
//                                          store of its own, written from one snapshot
//     blobs.txt                            "<digest> <size>" per line: the blob files it holds
//     backup.json                          what it holds and how to check it: {"format","id","created",
//                                          "replica_id","log_epoch","log_head","incremental","peers",
//                                          "meta_files":[{"name","size","sha256"}],"blobs":{"count",
//                                          "bytes","copied","copied_bytes","list_sha256"}}
//     backup.json.sha256                   SHA-256 of backup.json (hex): damage to it is seen too
//   backups/.partial-<id>/                 a backup being written, renamed to <id> once complete;
//                                          a later backup removes what a crash left
#include <array>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <chrono>
#include <ctime>
#include <string_view>

#include "berth/oci/digest.hpp"

namespace berth::storage::layout {

inline std::filesystem::path blobs_dir(const std::filesystem::path& root) { return root / "blobs"; }
inline std::filesystem::path blobs_set_aside_dir(const std::filesystem::path& root,
                                                 std::chrono::system_clock::time_point when) {
    const auto t = std::chrono::system_clock::to_time_t(when);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", std::gmtime(&t));
    return root / ("blobs.moved-" + std::string(stamp));
}
inline std::filesystem::path scratch_dir(const std::filesystem::path& root) { return root / "uploads"; }
inline std::filesystem::path quarantine_dir(const std::filesystem::path& root) { return root / "quarantine"; }
// With blobs in an object store: the hot ones on this replica's disk (BlobCache), <alg>-<hex> each.
inline std::filesystem::path blob_cache_dir(const std::filesystem::path& root) { return root / "blob-cache"; }
// With blobs in an object store: the object keys under its prefix.
inline std::string blob_key(const oci::Digest& digest) {
    return "blobs/" + std::string(oci::algorithm_name(digest.algorithm())) + "/" + digest.hex();
}
inline std::string quarantine_key(const oci::Digest& digest) {
    return "quarantine/" + std::string(oci::algorithm_name(digest.algorithm())) + "-" + digest.hex();
}
inline std::filesystem::path meta_dir(const std::filesystem::path& root) { return root / "meta"; }
inline std::filesystem::path replica_addresses_file(const std::filesystem::path& root) {
    return root / "replica-addresses.json";
}
inline std::filesystem::path issuer_keys_dir(const std::filesystem::path& root) { return root / "issuer-keys"; }
inline std::filesystem::path notifications_dir(const std::filesystem::path& root) { return root / "notifications"; }

// A backup target's parts (the tree above).
namespace backup {
inline std::filesystem::path blobs_dir(const std::filesystem::path& target) { return target / "blobs"; }
inline std::filesystem::path backups_dir(const std::filesystem::path& target) { return target / "backups"; }
inline std::filesystem::path backup_dir(const std::filesystem::path& target, const std::string& id) {
    return backups_dir(target) / id;
}
inline std::filesystem::path partial_dir(const std::filesystem::path& target, const std::string& id) {
    return backups_dir(target) / (".partial-" + id);
}
inline bool is_partial(const std::filesystem::path& dir) { return dir.filename().string().starts_with(".partial-"); }
inline std::filesystem::path meta_dir(const std::filesystem::path& backup) { return backup / "meta"; }
inline std::filesystem::path blob_list(const std::filesystem::path& backup) { return backup / "blobs.txt"; }
inline std::filesystem::path description(const std::filesystem::path& backup) { return backup / "backup.json"; }
inline std::filesystem::path description_sum(const std::filesystem::path& backup) {
    return backup / "backup.json.sha256";
}
}  // namespace backup

inline std::filesystem::path blob_file(const std::filesystem::path& blobs_dir, const oci::Digest& digest) {
    const auto& hex = digest.hex();
    return blobs_dir / std::string(oci::algorithm_name(digest.algorithm())) / hex.substr(0, 2) / hex;
}
inline std::filesystem::path quarantine_file(const std::filesystem::path& quarantine_dir, const oci::Digest& digest) {
    return quarantine_dir / (std::string(oci::algorithm_name(digest.algorithm())) + "-" + digest.hex());
}
inline std::filesystem::path upload_file(const std::filesystem::path& scratch_dir, const std::string& upload_id) {
    return scratch_dir / upload_id;
}
// A fresh scratch file name for a blob copied from a peer.
std::filesystem::path fetch_file(const std::filesystem::path& scratch_dir);
// Nothing resumes a copy from a peer cut short: BlobStore removes these at start.
inline bool is_fetch_file(const std::filesystem::path& file) { return file.filename().string().starts_with("fetch-"); }

enum ColumnFamily {
    cf_settings,
    cf_repos,
    cf_manifests,
    cf_tags,
    cf_links,
    cf_referrers,
    cf_uploads,
    cf_log,
    cf_pulls,
    cf_usage,
    cf_lineage,
    cf_count
};
// Spelled out, not rocksdb::kDefaultColumnFamilyName: static initialisation order.
inline constexpr std::array<const char*, cf_count> column_families = {
    "default", "repos", "manifests", "tags", "links", "referrers", "uploads", "log", "pulls", "usage", "lineage"};

namespace setting {
inline constexpr const char* replica_id = "replica_id";
inline constexpr const char* log_epoch = "log_epoch";
inline std::string cursor(const std::string& peer_id) { return "cursor/" + peer_id; }
inline std::string bootstrap(const std::string& peer_id) { return "bootstrap/" + peer_id; }
inline constexpr const char* peer_cursors = "peer_cursors";
inline constexpr const char* usage_counted = "usage_counted";
inline constexpr const char* lineage_indexed = "lineage_indexed";
inline constexpr const char* peer_addresses = "peer_addresses";
inline constexpr const char* log_compacted = "log_compacted";
inline constexpr const char* cursor_key = "cursor_key";
inline constexpr const char* bucket_backup_taken = "bucket_backup_taken";
inline std::string notify_progress(const std::string& endpoint) { return "notify/" + endpoint; }
inline std::string notify_scan(const std::string& endpoint) { return "notify-scan/" + endpoint; }
// The configuration file the server last started with ("" for none): `berth import --root` applies
// its policies and quotas when not given --config.
inline constexpr const char* config_file = "config_file";
inline std::string tag_claim(const std::string& repo, const std::string& tag) {
    return "claim/" + repo + std::string(1, '\0') + tag;
}
}  // namespace setting

// Keys of the usage column family.
inline std::string usage_total_key(std::string_view ns) { return std::string(1, '\0').append(ns); }
inline std::string usage_repository_key(std::string_view repo) { return std::string(1, '\1').append(repo); }
// The count of a store whose usage_counted setting is older is redone at start-up.
inline constexpr std::string_view usage_count_version = "2";
inline std::string usage_blob_key(std::string_view ns, std::string_view digest) {
    return std::string(ns).append(1, '\0').append(digest);
}

// Keys of the lineage column family: the first byte says which kind.
namespace lineage_key {
inline std::string join(char kind, std::initializer_list<std::string_view> parts) {
    std::string out(1, kind);
    for (auto part : parts) out.append(part).push_back('\0');
    out.pop_back();
    return out;
}
// kind 'c' (whole layer list) or 'p' (a prefix of it); chain: 32 hex, so no separator after it.
inline std::string chain(char kind, std::string_view chain, std::string_view repo, std::string_view digest) {
    return std::string(1, kind).append(chain).append(repo).append(1, '\0').append(digest);
}
inline std::string index(std::string_view repo, std::string_view child, std::string_view index) {
    return join('i', {repo, child, index});
}
inline std::string history(std::string_view repo, std::string_view tag, std::string_view digest) {
    return join('h', {repo, tag, digest});
}
inline std::string tagged(std::string_view repo, std::string_view digest, std::string_view tag) {
    return join('d', {repo, digest, tag});
}
}  // namespace lineage_key

}  // namespace berth::storage::layout
