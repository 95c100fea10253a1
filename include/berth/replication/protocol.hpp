#pragma once
// The peer protocol, whole: every /_berth/v1 path, header and wire encoding
// that replicas use among themselves. Nothing else spells them.
//
//   GET  log?after=S&limit=N        a page of the change log after sequence S:
//                                   {"replica","epoch","head","first","filling","entries":[{"seq","event"}]}
//                                   (filling: the sender is empty and copying its peers' state);
//                                   410 with the same fields and no entries when entries after S
//                                   were compacted away (first > S + 1): the caller re-bootstraps
//   GET  state?part=P&after=K&limit=N&session=I&since=H[&summary=1]
//                                   a page of every record, tombstones included, from one moment
//                                   of the sender's index: P is links, images, indexes or tags (the
//                                   order to apply them in), K the hex of the last key already read
//                                   ("" from the start), I the moment ("" or unknown: a new one), H
//                                   the head of the first moment this caller read (where it will
//                                   follow the log from, so the log is kept from there):
//                                   {"replica","epoch","session","head","last","done","hash","count",
//                                    "records":[{"repo","key","clock","origin","deleted"
//                                                [,"digest"|"media_type","bytes"]}]}
//                                   with summary=1 no records: the caller compares the hash of
//                                   its own records up to "last" and skips a range it agrees on
//   GET  status                     replication state, for operators
//   GET  blobs/<digest>             a blob's bytes
//   GET  manifests/<digest>?repo=R  a live manifest's bytes, with its media type
//   GET  record?repo=R&link=D       the stamp of a live record ({"clock","origin"[,"digest"]});
//            |&manifest=D|&tag=T    404 when this replica holds none
//   GET  pulls?repo=R&since=MS      names (tags, digests) of R this replica served to clients at or
//            [&after=N]             after MS (ms since the epoch), with when, in byte order after N, at
//                                   most pulls_page: {"pulls":[[name,ms],...],"more":bool}; for retention
//   POST apply                      events a replica pushes for its write quorum, with the bytes of
//                                   the manifests they record: {"events":[...],"manifests":[{"repo",
//                                   "digest","media_type","bytes"}]}; 200 once they are durable here
//
// Events are storage's change-log events (storage/events.hpp), shipped in
// the encoding the log stores them in. Stamps travel as {"clock","origin"}.
//
// Every request carries the shared secret and the sender's replica id, and every request and answer the
// range of protocol versions its sender speaks, "min-max". Two replicas whose
// ranges do not overlap refuse each other's requests and events, so a rolling
// upgrade never has one replica misapply what another sends.
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "berth/storage/events.hpp"
#include "berth/storage/meta_store.hpp"
#include "berth/storage/records.hpp"

namespace berth::replication::protocol {

// Raise `version` with every change to what is above; raise `oldest` when
// this build no longer understands what an older one sends.
inline constexpr int oldest = 1;
inline constexpr int version = 3;  // 2: paged state, log compaction, pulls; 3: tag claims

inline constexpr std::string_view prefix = "/_berth/v1/";

namespace header {
inline constexpr const char* secret = "Berth-Peer-Secret";
inline constexpr const char* replica = "Berth-Replica";      // the id of the replica sending a request
inline constexpr const char* forwarded = "Berth-Forwarded";  // an upload request sent on to its owner
inline constexpr const char* versions = "Berth-Protocol";
}  // namespace header

// What a replica id may be: [a-z0-9-], 1 to 63 characters. It names events' origins, upload ids and
// the notices receivers get.
bool valid_replica_id(std::string_view id);
// The valid id nearest to a name (a configured id, a host name): lower-cased, other characters
// dropped, cut at 63; "berth" when nothing is left.
std::string replica_id_from(std::string_view name);

struct Versions {
    int oldest = protocol::oldest;
    int newest = protocol::version;
};
// This build's "min-max".
std::string versions_text();
// A missing header is a berth from before versions were exchanged: 1-1.
// nullopt for a value that is not "N-M" with 1 <= N <= M.
std::optional<Versions> parse_versions(std::string_view text);
bool compatible(const Versions& peer);
// For logs and errors: why a peer is refused.
std::string incompatibility(const Versions& peer);

// Request targets (path and query), and the queries parsed back by the replica answering. A
// query's values come from `Query` (the serving side's decoded parameter by that name).
using Query = std::function<std::optional<std::string>(std::string_view name)>;

struct LogRequest {
    std::uint64_t after = 0;
    std::size_t limit = 500;
};
std::string log_target(std::uint64_t after, std::size_t limit);
LogRequest parse_log_query(const Query& query);

struct StateRequest {
    storage::StatePart part = storage::StatePart::links;
    std::string after;  // raw key
    std::size_t limit = 1000;
    std::string session;
    std::uint64_t since = 0;
    bool summary = false;
};
std::string state_target(const StateRequest& request);
// Throws std::invalid_argument naming what is wrong (no part, a key that is not hex).
StateRequest parse_state_query(const Query& query);

std::string blob_target(const std::string& digest);
std::string manifest_target(const std::string& repo, const std::string& digest);
// The repository of manifests/<digest>?repo=R.
std::string manifest_repository(const Query& query);

enum class RecordKind { link, manifest, tag };
struct RecordRequest {
    std::string repo;
    RecordKind kind = RecordKind::link;
    std::string key;
};
std::string record_target(const std::string& repo, RecordKind kind, const std::string& key);
// nullopt when the query names no link, manifest or tag.
std::optional<RecordRequest> parse_record_query(const Query& query);
// The answer: the live record's stamp, and a tag's digest.
struct RecordAnswer {
    storage::Stamp stamp;
    std::string digest;  // tags only
};
std::string encode_record(const RecordAnswer& answer);
// Throws std::invalid_argument on a body that is not one (a tag's without its digest).
RecordAnswer parse_record(std::string_view body, RecordKind kind);

std::string apply_target();

struct PullsRequest {
    std::string repo;
    std::uint64_t since_ms = 0;
    std::string after;
};
std::string pulls_target(const std::string& repo, std::uint64_t since_ms, const std::string& after);
PullsRequest parse_pulls_query(const Query& query);
inline constexpr std::size_t pulls_page = 10000;

// A claim on a new immutable tag (docs/ha.md): each replica promises one digest per tag,
// durably, and a push takes the tag only with a majority of promises.
struct ClaimRequest {
    std::string repo, tag, digest;
    // Wall clock ms after which the asking replica no longer waits: a request that arrives
    // later (a frozen replica thawing) promises nothing, so an abandoned push reserves no tag.
    std::uint64_t expires_ms = 0;
};
struct ClaimAnswer {
    bool granted = false;
    std::string digest;  // the digest this replica holds for the tag (promised or tagged); "" for none
};
std::string claim_target();
std::string encode_claim(const ClaimRequest& request);
// nullopt for a body that is not one (a name, tag or digest that is invalid).
std::optional<ClaimRequest> parse_claim(std::string_view body);
std::string encode_claim_answer(const ClaimAnswer& answer);
// Throws std::invalid_argument on a body that is not one.
ClaimAnswer parse_claim_answer(std::string_view body);

// What the peer API serves, from the path after the prefix.
enum class Operation { log, state, status, blob, manifest, record, apply, pulls, claim, unknown };
Operation operation_of(std::string_view path);
// The <digest> of blobs/<digest> or manifests/<digest>.
std::string_view content_digest(std::string_view path);
const char* record_kind_name(RecordKind kind);

struct PushedManifest {
    std::string repo, digest, media_type, bytes;
};
struct ApplyRequest {
    std::vector<storage::Event> events;
    std::vector<PushedManifest> manifests;  // so the receiver need not fetch them back
};
std::string encode_apply(const ApplyRequest& request);
// nullopt for a body that is not one; a manifest whose bytes do not match its digest is left out.
std::optional<ApplyRequest> parse_apply(std::string_view body);

// nullopt for a part name that is none.
std::optional<storage::StatePart> parse_part(std::string_view name);
const char* part_name(storage::StatePart part);
struct StatePageAnswer {
    std::string replica, epoch, session;
    std::uint64_t head = 0;
    storage::StatePage page;
};
std::string encode_state(const StatePageAnswer& answer);
// Throws nlohmann::json::exception (or std::invalid_argument for bad hex) on a malformed answer.
StatePageAnswer parse_state(std::string_view body);
// The bytes of a hex field (oci::unhex); throws std::invalid_argument for text that is not an even run of hex digits.
std::string unhex(std::string_view text);
// A page of a replica's change log (GET log_target): who answers, its log's epoch, head and
// first kept entry, whether it is an empty replica still filling from its peers, and the
// entries after the cursor asked for (sequence, the event's text).
struct LogPage {
    std::string replica, epoch;
    std::uint64_t head = 0, first = 0;
    bool filling = false;
    std::vector<std::pair<std::uint64_t, std::string>> entries;
};
std::string encode_log_page(const LogPage& page);
// Throws std::invalid_argument on a body that is not one.
LogPage parse_log_page(std::string_view body);

// Names with the time each was last pulled (ms since the epoch), and whether more follow.
struct PullsPage {
    std::vector<std::pair<std::string, std::uint64_t>> pulls;
    bool more = false;
};
std::string encode_pulls(const PullsPage& page);
// nullopt for a body that is not one.
std::optional<PullsPage> parse_pulls(std::string_view body);

// GET status: this replica's replication state, for operators and the cluster page.
struct PeerState {
    std::string address, id;
    bool reachable = false, caught_up = false;
    std::uint64_t cursor = 0, head = 0, applied = 0, errors = 0;
    double lag_seconds = 0;
    std::string last_error, incompatible;
    std::string bootstrap_part;  // while bootstrapping from it; empty otherwise
    std::uint64_t bootstrap_records = 0;
};
// The last backup a replica took (config `backup`): told in its status, so no replica ever needs
// another's backup secret to know it.
struct LastBackup {
    std::string id;              // "" before the first
    std::uint64_t finished = 0;  // Unix seconds, 0 while none has ended
    std::string error;           // why the last one failed; "" when it succeeded
};
struct Status {
    std::string replica, epoch;
    std::uint64_t log_head = 0;
    bool ready = false;
    std::uint64_t bytes_fetched = 0;
    std::vector<PeerState> peers;
    std::optional<LastBackup> last_backup;  // nullopt: the replica takes no backups
};
std::string encode_status(const Status& status);
// nullopt for a body that is not one (the web UI's cluster page reads its peers' answers).
std::optional<Status> parse_status(std::string_view body);
std::string status_target();

// What a replica keeps of its peers between runs (settings, storage/layout.hpp), in the
// protocol's terms: where an unfinished bootstrap from a peer stands, so it resumes there,
// and how far each peer has read this replica's log.
struct BootstrapProgress {
    std::string epoch;
    std::uint64_t since = 0;  // the peer's head at the first moment read
    storage::StatePart part = storage::StatePart::links;
    std::string after;  // raw key
    bool incremental = false;
};
std::string encode_progress(const BootstrapProgress& progress);
// nullopt for text that is not one: the bootstrap starts over, which is only slower.
std::optional<BootstrapProgress> parse_progress(std::string_view text);
std::string encode_cursors(const std::map<std::string, std::uint64_t>& cursors);
// What of the text is well-formed.
std::map<std::string, std::uint64_t> parse_cursors(std::string_view text);

// A stamp on the wire: {"clock","origin"}, to which a record adds its own
// fields. stamp_of throws nlohmann::json::exception when they are missing or mistyped.
nlohmann::json stamp_json(const storage::Stamp& stamp);
storage::Stamp stamp_of(const nlohmann::json& object);

}  // namespace berth::replication::protocol
