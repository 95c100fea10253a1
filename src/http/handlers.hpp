#pragma once
// A planner per route: parse what the route needs, call the registry,
// render the answer. Errors thrown here become the spec's error JSON.
// handlers.cpp routes and authorizes; each resource has a file of its own.
#include "berth/net/client.hpp"
#include "message.hpp"

namespace berth::auth {
class Authorizer;
class DelegatedAccess;
}  // namespace berth::auth
namespace berth::registry {
class Registry;
}

namespace berth::http {

Plan plan_request(Services& services, Request& request);

// from_peer: a replica reading through on behalf of its client.
Plan plan_blob(registry::Registry& registry, Request& request, bool from_peer);      // blob_handlers.cpp
Plan plan_upload_start(registry::Registry& registry, Request& request);              // upload_handlers.cpp
Plan plan_upload(registry::Registry& registry, Request& request);                    // upload_handlers.cpp
Plan plan_manifest(registry::Registry& registry, Request& request, bool from_peer);  // manifest_handlers.cpp
Plan plan_tags(registry::Registry& registry, Request& request);                      // tag_handlers.cpp
Plan plan_referrers(registry::Registry& registry, Request& request);                 // referrer_handlers.cpp
// authorizer may be null; the listing is filtered to what the caller may pull.
Plan plan_catalog(registry::Registry& registry, const auth::Authorizer* authorizer, const Cursors& cursors,
                  Request& request);
Plan plan_token(const auth::Authorizer* authorizer, Request& request);  // token_handlers.cpp
// agent_handlers.cpp: the node agent's answer where the replicas refuse the caller (or to
// /auth/token); nullopt to go on. What the agent serves at all: /v2/ pulls, probes, metrics.
std::optional<Plan> plan_delegated(auth::DelegatedAccess& door, Request& request);
bool agent_serves(RouteKind kind);
// operation_handlers.cpp: liveness, readiness, metrics, namespace usage, lineage, backups.
Plan plan_healthz();
Plan plan_readyz(const replication::PeerService* peers);
Plan plan_metrics(const observe::MetricsRegistry* metrics);
Plan plan_usage(registry::Registry& registry, const auth::Authorizer* authorizer, const Cursors& cursors,
                Request& request);
// A page of namespace usage as JSON ({"namespaces":[...],"next"}), filtered to the namespaces
// whose every repository the caller may pull (may_pull null: all); for plan_usage and the web UI.
struct UsageAnswer {
    std::string body;
    std::size_t read = 0;             // namespaces read for the page
    std::optional<std::string> next;  // where the next page starts, when more follow
};
UsageAnswer usage_answer(registry::Registry& registry, const std::function<bool(const std::string&)>& may_pull,
                         const Cursors& cursors, std::optional<std::size_t> n, const std::string& last);
Plan plan_lineage(const registry::Registry& registry, const auth::Authorizer* authorizer, const Cursors& cursors,
                  Request& request);
Plan plan_backup(storage::BackupJob* backups, const Request& request);
// ui_handlers.cpp: the web UI, its assets, sign-in and JSON views (docs/ui.md).
Plan plan_ui(Services& services, Request& request);
// ui_cluster.cpp: every replica's state as the web UI's cluster page shows it, as JSON.
std::string cluster_json(Services& services);
// A plan that answers at once, on the I/O thread.
Plan immediate(Response response);
Response json_response(int status, std::string body, std::string content_type = "application/json");
// The peer API (replication/protocol.hpp); the caller has checked the peer secret.
Plan plan_peer_request(replication::PeerService& peers, Request& request);
// Sends an upload request on to the replica that owns the session, with the client's own
// credentials: the owner authorizes it as the client's. target: built from checked parts only.
Plan plan_forward(const replication::Cluster& cluster, const std::string& owner, Request& request,
                  const std::string& method, const std::string& target);

// Range: a single "bytes=a-b", "bytes=a-" or "bytes=-n". nullopt means serve the
// whole blob (no header, or one we may ignore); an unsatisfiable range throws.
struct ByteRange {
    std::uint64_t first;
    std::uint64_t length;
};
std::optional<ByteRange> parse_range(std::string_view header, std::uint64_t size);

// Content-Range of an upload chunk: "a-b" (as Docker sends it) or "bytes a-b/*".
struct ChunkRange {
    std::uint64_t first;
    std::uint64_t last;
};
std::optional<ChunkRange> parse_content_range(std::string_view header);

}  // namespace berth::http
