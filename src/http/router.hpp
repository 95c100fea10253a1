#pragma once
// Maps a request target to a route of the /v2/ API. Pure string work, no Beast,
// so it is unit-tested directly. Path segments are percent-decoded after
// splitting, so an encoded '/' can never change which route matches.
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace berth::http {

enum class RouteKind {
    base,
    catalog,
    tags,
    manifest,
    blob,
    upload_start,
    upload,
    referrers,
    healthz,
    readyz,
    metrics,
    token,    // /auth/token, the built-in token endpoint
    peer,     // the peer API (replication/protocol.hpp); reference: the path after its prefix
    usage,    // /_berth/v1/usage, namespace usage for users (docs/quotas.md)
    lineage,  // /_berth/v1/lineage, what is built on a base (docs/policies.md)
    backup,   // /_berth/v1/backup, backups the server takes (docs/backup.md)
    access,   // /_berth/v1/access?repository=NAME: may the caller pull NAME (the node agent asks)
    ui,       // /ui/..., the web UI (docs/ui.md); reference: the path after /ui/ ("/ui" alone: none)
    unknown
};

// Namespace usage and lineage for users, backups for operators. They sit beside the peer API's paths, so the
// router matches them before their prefix.
inline constexpr std::string_view usage_path = "/_berth/v1/usage";
inline constexpr std::string_view lineage_path = "/_berth/v1/lineage";
inline constexpr std::string_view backup_path = "/_berth/v1/backup";
// Answers 204 with `Berth-Access: pull` to a caller the rules let pull the repository its query
// names, whether or not the repository exists; a refusal is the usual 401 or 403.
inline constexpr std::string_view access_path = "/_berth/v1/access";
inline constexpr std::string_view access_header = "Berth-Access";
inline constexpr std::string_view ui_path = "/ui";

struct Route {
    RouteKind kind = RouteKind::unknown;
    std::string name;       // repository
    std::string reference;  // tag or digest, blob digest, or upload id
};

class Query {
public:
    static Query parse(std::string_view text);
    std::optional<std::string> get(std::string_view key) const;
    std::vector<std::string> all(std::string_view key) const;

private:
    std::vector<std::pair<std::string, std::string>> params_;
};

struct Target {
    Route route;
    Query query;
    std::string raw_query;  // "?..." as received, or empty
};

// What the authorization rules must allow (auth::Action), or none: authentication at most.
enum class Needs { none, pull, push, del };

// The route table: one row per kind, in the enum's order (checked at compile time).
struct RouteSpec {
    RouteKind kind;
    std::string_view label;  // the route label of berth_http_* metrics
    bool repository;         // names a repository: ?ns= applies, and the rules are asked about it
    bool authenticated;      // authenticated like /v2/ (usage and lineage too, though under /_berth/v1/)
    // A GET or HEAD is planned on the I/O thread: no peer, token or scan of repositories behind it.
    bool quick_reads;
    // For a GET or HEAD, a DELETE, and any other method. Without a repository, pull means
    // pull on the catalog: the answer is filtered to what the caller may pull.
    Needs read, del, write;
};
const RouteSpec& route_spec(RouteKind kind);
inline std::string_view route_label(RouteKind kind) { return route_spec(kind).label; }

// nullopt when the target is not a path (absolute-form, '*', bad escapes).
std::optional<Target> parse_target(std::string_view target);

// Every part of a route meets its grammar before anything sees it (throws the spec's error), so
// nothing a client decoded (an encoded '/', '?' or '#') reaches a path built from it, the store,
// another replica, or the question the node agent asks: a name, a reference that is a tag or a
// digest (a PUT's bad tag is TAG_INVALID, a read's MANIFEST_UNKNOWN), a blob or subject digest,
// an upload id.
void require_valid_parts(const Route& route, bool put);

// Where an upload request goes on the replica owning its session: built from the checked name
// and id and the one query parameter an upload takes (digest), re-escaped.
std::string forwarded_upload_target(const Target& target);

std::optional<std::string> percent_decode(std::string_view text, bool plus_is_space);

}  // namespace berth::http
