// The route table: every route berth answers, one row each, tried in order. A new route is its row
// here (with its handler's declaration beside it) and its handler in the resource's file.
#include "routes.hpp"

#include <array>

namespace berth::http {

// The handlers, by the file they live in.
Plan plan_base(Context&, Request&);                   // catalog_handlers.cpp
Plan plan_catalog(Context&, Request&);                // catalog_handlers.cpp
Plan plan_tags(Context&, Request&);                   // tag_handlers.cpp
Plan plan_upload_start(Context&, Request&);           // upload_handlers.cpp
Plan plan_upload(Context&, Request&);                 // upload_handlers.cpp (forward.cpp: to the session's owner)
Plan plan_manifest(Context&, Request&);               // manifest_handlers.cpp
Plan plan_blob(Context&, Request&);                   // blob_handlers.cpp
Plan plan_referrers(Context&, Request&);              // referrer_handlers.cpp
Plan plan_healthz(Context&, Request&);                // operation_handlers.cpp
Plan plan_readyz(Context&, Request&);                 // operation_handlers.cpp
Plan plan_metrics(Context&, Request&);                // operation_handlers.cpp
Plan plan_token(Context&, Request&);                  // token_handlers.cpp (the node agent relays it)
Plan plan_usage(Context&, Request&);                  // usage_handlers.cpp
Plan plan_lineage(Context&, Request&);                // lineage_handlers.cpp
Plan plan_backup(Context&, Request&);                 // operation_handlers.cpp
Plan plan_access(Context&, Request&);                 // agent_handlers.cpp: the node agent's question
Plan plan_agents(Context&, Request&);                 // agent_handlers.cpp: node agents telling where they are
Plan plan_notify_progress(Context&, Request&);        // notification_handlers.cpp: what replicas tell each other
Plan plan_notifications(Context&, Request&);          // notification_handlers.cpp
Plan plan_notification_endpoint(Context&, Request&);  // notification_handlers.cpp
Plan plan_events(Context&, Request&);                 // event_handlers.cpp: the pollers' feed
Plan plan_peer(Context&, Request&);                   // peer_handlers.cpp: replication/protocol.hpp's operations
Plan plan_ui_enter(Context&, Request&);               // ui_handlers.cpp
Plan plan_ui_login(Context&, Request&);               // ui_handlers.cpp
Plan plan_ui_logout(Context&, Request&);              // ui_handlers.cpp
Plan plan_ui_file(Context&, Request&);                // ui_handlers.cpp
Plan plan_ui_whoami(Context&, Request&);              // ui_handlers.cpp
Plan plan_ui_repositories(Context&, Request&);        // ui_handlers.cpp
Plan plan_ui_repository(Context&, Request&);          // ui_handlers.cpp
Plan plan_ui_manifest(Context&, Request&);            // ui_handlers.cpp
Plan plan_ui_mirrors(Context&, Request&);             // ui_handlers.cpp
Plan plan_ui_namespaces(Context&, Request&);          // ui_handlers.cpp
Plan plan_ui_retention(Context&, Request&);           // ui_handlers.cpp
Plan plan_ui_cluster(Context&, Request&);             // ui_handlers.cpp
Plan plan_ui_notifications(Context&, Request&);       // ui_handlers.cpp
Plan plan_ui_no_view(Context&, Request&);             // ui_handlers.cpp
Plan plan_unknown(Context&, Request&);                // catalog_handlers.cpp

namespace {

using enum Auth;
using N = Needs;
using P = Part;
constexpr unsigned Q = Flags::quick, A = Flags::agent, R = Flags::peer_reads, M = Flags::mounts, U = Flags::ui,
                   W = Flags::quick_writes;

// clang-format off
constexpr std::array table = {
// pattern                                label             auth      read     del      write    part           flags      handler
Route{"/v2/",                             "base",           registry, N::none, N::none, N::none, P::none,      Q|A,       plan_base},
Route{"/v2/_catalog",                     "catalog",        registry, N::pull, N::pull, N::pull, P::none,      Q|A,       plan_catalog},
Route{"/v2/{name}/tags/list",             "tags",           registry, N::pull, N::pull, N::pull, P::none,      Q|A,       plan_tags},
Route{"/v2/{name}/blobs/uploads/",        "upload_start",   registry, N::push, N::push, N::push, P::none,      Q|A|M|W,   plan_upload_start},
Route{"/v2/{name}/blobs/uploads/{reference}", "upload",     registry, N::push, N::push, N::push, P::upload_id, Q|A|W,     plan_upload},
Route{"/v2/{name}/manifests/{reference}", "manifest",       registry, N::pull, N::del,  N::push, P::reference, Q|A|R,     plan_manifest},
Route{"/v2/{name}/blobs/{reference}",     "blob",           registry, N::pull, N::del,  N::push, P::digest,    Q|A|R,     plan_blob},
Route{"/v2/{name}/referrers/{reference}", "referrers",      registry, N::pull, N::pull, N::pull, P::digest,    Q|A,       plan_referrers},
Route{"/healthz",                         "healthz",        none,     N::none, N::none, N::none, P::none,      Q|A,       plan_healthz},
Route{"/readyz",                          "readyz",         none,     N::none, N::none, N::none, P::none,      Q|A,       plan_readyz},
Route{"/metrics",                         "metrics",        none,     N::none, N::none, N::none, P::none,      Q|A,       plan_metrics},
Route{"/auth/token",                      "token",          none,     N::none, N::none, N::none, P::none,      A,         plan_token},
Route{"/_berth/v1/usage",                 "usage",          registry, N::pull, N::pull, N::pull, P::none,      0,         plan_usage},
Route{"/_berth/v1/lineage",               "lineage",        registry, N::pull, N::pull, N::pull, P::none,      0,         plan_lineage},
Route{"/_berth/v1/backup",                "backup",         backup,   N::none, N::none, N::none, P::none,      0,         plan_backup},
Route{"/_berth/v1/access",                "access",         registry, N::pull, N::pull, N::pull, P::none,      Q,         plan_access, "repository"},
Route{"/_berth/v1/agents",                "agents",         Auth::agent, N::none, N::none, N::none, P::none,   0,         plan_agents},
Route{"/_berth/v1/events",                "events",         registry, N::pull, N::pull, N::pull, P::none,      0,         plan_events},
Route{"/_berth/v1/notifications/progress", "notify_progress", peer,  N::none, N::none, N::none, P::none,      0,         plan_notify_progress},
Route{"/_berth/v1/notifications",         "notifications",  registry, N::none, N::none, N::none, P::none,      0,         plan_notifications},
Route{"/_berth/v1/notifications/{rest}",  "notification",   registry, N::none, N::none, N::none, P::none,      0,         plan_notification_endpoint},
Route{"/_berth/v1/{rest}",                "peer",           peer,     N::none, N::none, N::none, P::none,      0,         plan_peer},
Route{"/ui",                              "ui",             none,     N::none, N::none, N::none, P::none,      U,         plan_ui_enter},
Route{"/ui/login",                        "ui",             none,     N::none, N::none, N::none, P::none,      U,         plan_ui_login},
Route{"/ui/logout",                       "ui",             none,     N::none, N::none, N::none, P::none,      U,         plan_ui_logout},
Route{"/ui/api/whoami",                   "ui",             Auth::ui, N::none, N::none, N::none, P::none,      U,         plan_ui_whoami},
Route{"/ui/api/repositories",             "ui",             Auth::ui, N::none, N::none, N::none, P::none,      U,         plan_ui_repositories},
Route{"/ui/api/repository",               "ui",             Auth::ui, N::none, N::none, N::none, P::none,      U,         plan_ui_repository},
Route{"/ui/api/manifest",                 "ui",             Auth::ui, N::none, N::none, N::none, P::none,      U,         plan_ui_manifest},
Route{"/ui/api/mirrors",                  "ui",             Auth::ui, N::none, N::none, N::none, P::none,      U,         plan_ui_mirrors},
Route{"/ui/api/namespaces",               "ui",             Auth::ui, N::none, N::none, N::none, P::none,      U,         plan_ui_namespaces},
Route{"/ui/api/retention",                "ui",             Auth::ui, N::none, N::none, N::none, P::none,      U,         plan_ui_retention},
Route{"/ui/api/cluster",                  "ui",             Auth::ui, N::none, N::none, N::none, P::none,      U,         plan_ui_cluster},
Route{"/ui/api/notifications",            "ui",             Auth::ui, N::none, N::none, N::none, P::none,      U,         plan_ui_notifications},
Route{"/ui/api/{rest}",                   "ui",             Auth::ui, N::none, N::none, N::none, P::none,      U,         plan_ui_no_view},
Route{"/ui/{rest}",                       "ui",             none,     N::none, N::none, N::none, P::none,      U,         plan_ui_file},
Route{"",                                 "unknown",        none,     N::none, N::none, N::none, P::none,      Q|A,       plan_unknown},
};
// clang-format on
static_assert(table.size() <= max_routes);

}  // namespace

std::span<const Route> routes() { return table; }

}  // namespace berth::http
