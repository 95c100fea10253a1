// Routing a planned request: ?ns= resolved, the caller authenticated and
// authorized as the route table says (router.hpp), then the route's handler
// (one file per resource: *_handlers.cpp).
#include "handlers.hpp"

#include "berth/auth/authorizer.hpp"
#include "berth/auth/delegated.hpp"
#include "berth/net/reach.hpp"
#include "berth/registry/registry.hpp"
#include "berth/registry/upload_id.hpp"
#include "berth/replication/cluster.hpp"
#include "berth/replication/peer_service.hpp"
#include "responses.hpp"

namespace berth::http {
namespace {

using oci::Error;
using oci::ErrorCode;
namespace protocol = replication::protocol;

// What a request needs to be allowed: the route table's action for its method, and for a
// mount, pull on the repository it mounts from.
std::vector<auth::Need> needs_of(const Request& request) {
    const auto& route = request.target.route;
    const auto& spec = route_spec(route.kind);
    const auto needs = request.method == Method::get || request.method == Method::head ? spec.read
                       : request.method == Method::del                                 ? spec.del
                                                                                       : spec.write;
    if (needs == Needs::none) return {};
    const auto action = needs == Needs::pull   ? auth::Action::pull
                        : needs == Needs::push ? auth::Action::push
                                               : auth::Action::del;
    if (!spec.repository) return {auth::Need{{}, action, true}};
    std::vector<auth::Need> out{{route.name, action, false}};
    if (route.kind == RouteKind::upload_start)
        if (auto from = request.target.query.get("from"); from && request.target.query.get("mount"))
            out.push_back({*from, auth::Action::pull, false});
    return out;
}

// A replica that speaks no protocol version this one does is refused, not misunderstood.
void require_compatible_peer(const Request& request) {
    auto versions = protocol::parse_versions(request.peer_versions);
    if (!versions) throw Error(ErrorCode::bad_request, "malformed peer protocol versions");
    if (!protocol::compatible(*versions))
        throw Error(ErrorCode::bad_request, "incompatible peer protocol", protocol::incompatibility(*versions));
}

Plan peer_plan(Services& services, Request& request) {
    if (!services.peers || !services.peers->authorized(request.peer_secret))
        return immediate(error_response(ErrorCode::unauthorized, "peer authentication required"));
    require_compatible_peer(request);
    auto plan = plan_peer_request(*services.peers, request);
    plan.finish = [finish = std::move(plan.finish)](std::string& body, std::uint64_t offset) {
        auto response = finish(body, offset);
        response.set(protocol::header::versions, protocol::versions_text());
        return response;
    };
    return plan;
}

// Sessions live on the replica that opened them; others pass requests on, with the client's
// credentials, to a path built from the checked name and id and the one query parameter an
// upload takes.
Plan upload_or_forward(Services& services, Request& request) {
    const auto& route = request.target.route;
    const std::string owner(registry::upload_owner(route.reference));
    if (services.cluster && !request.forwarded && owner != services.cluster->self_id())
        if (auto address = services.cluster->address_of(owner)) {
            net::reach(net::peers_party);
            return plan_forward(*services.cluster, *address, request, std::string(method_name(request.method)),
                                forwarded_upload_target(request.target));
        }
    return plan_upload(services.registry, request);
}

// What a replica may read of another through /v2/ on the cluster's word alone: the blobs and
// manifests a fetch for the whole cluster streams from the replica that owns it (proxy), which
// the peer API gives any replica anyway. Every write and every upload request is authorized as
// its client's own, forwarded or not.
bool peer_read(const Services& services, const Request& request) {
    if (!request.forwarded || !services.peers || !services.peers->authorized(request.peer_secret)) return false;
    const auto kind = request.target.route.kind;
    return (kind == RouteKind::blob || kind == RouteKind::manifest) &&
           (request.method == Method::get || request.method == Method::head);
}

Response refusal(const auth::Decision& decision) {
    const auto code = decision.status == 403   ? ErrorCode::denied
                      : decision.status == 429 ? ErrorCode::too_many_requests
                      : decision.status == 503 ? ErrorCode::unavailable
                                               : ErrorCode::unauthorized;
    auto response = error_response(code, decision.message);
    if (!decision.challenge.empty()) response.set("WWW-Authenticate", decision.challenge);
    return response;
}

// The node agent's question (auth/delegated.hpp): reaching here, the caller may pull.
Plan plan_access(const Request& request) {
    if (request.method != Method::get && request.method != Method::head) not_allowed();
    auto response = status_only(204);
    response.set(std::string(auth::access_header), "pull");
    return immediate(std::move(response));
}

Plan plan_route(Services& services, Request& request) {
    auto& registry = services.registry;
    const auto kind = request.target.route.kind;
    if (registry.options().pull_only && !agent_serves(kind))
        throw Error(ErrorCode::name_unknown, "the node agent serves pulls only: ask the registry");
    const bool from_peer = peer_read(services, request);
    if (from_peer) require_compatible_peer(request);
    if (services.delegated && !from_peer)
        if (auto answer = plan_delegated(*services.delegated, request)) return std::move(*answer);
    if (route_spec(kind).authenticated && services.authorizer && services.authorizer->enabled() && !from_peer) {
        auto decision =
            services.authorizer->check(request.authorization, needs_of(request), request.host, request.secure);
        if (!decision.allowed) return immediate(refusal(decision));
        request.principal = std::move(decision.principal);
    }
    switch (kind) {
        case RouteKind::token: return plan_token(services.authorizer, request);
        case RouteKind::base:
            if (request.method != Method::get && request.method != Method::head) not_allowed();
            return immediate(json_response(200, "{}"));
        case RouteKind::healthz: return plan_healthz();
        case RouteKind::readyz: return plan_readyz(services.peers);
        case RouteKind::metrics: return plan_metrics(services.metrics);
        case RouteKind::peer: return peer_plan(services, request);
        case RouteKind::catalog: return plan_catalog(registry, services.authorizer, *services.cursors, request);
        case RouteKind::usage: return plan_usage(registry, services.authorizer, *services.cursors, request);
        case RouteKind::lineage: return plan_lineage(registry, services.authorizer, *services.cursors, request);
        case RouteKind::backup: return plan_backup(services.backups, request);
        case RouteKind::access: return plan_access(request);
        case RouteKind::ui: return plan_ui(services, request);
        case RouteKind::tags: return plan_tags(registry, request);
        case RouteKind::manifest: return plan_manifest(registry, request, from_peer);
        case RouteKind::blob: return plan_blob(registry, request, from_peer);
        case RouteKind::upload_start: return plan_upload_start(registry, request);
        case RouteKind::upload: return upload_or_forward(services, request);
        case RouteKind::referrers: return plan_referrers(registry, request);
        case RouteKind::unknown: break;
    }
    return immediate(error_response(ErrorCode::name_unknown, "no such route"));
}

}  // namespace

Plan plan_request(Services& services, Request& request) {
    require_valid_parts(request.target.route, request.method == Method::put);
    // Registry proxying (spec main): ?ns=HOST names the repository HOST/NAME.
    std::optional<std::string> ns;
    if (route_spec(request.target.route.kind).repository) {
        ns = request.target.query.get("ns");
        const bool read = request.method == Method::get || request.method == Method::head;
        request.target.route.name = services.registry.repository_of(request.target.route.name, ns, read);
    }
    auto plan = plan_route(services, request);
    if (ns)
        plan.finish = [finish = std::move(plan.finish), ns = *ns](std::string& body, std::uint64_t offset) {
            auto response = finish(body, offset);
            response.set("OCI-Namespace", ns);
            return response;
        };
    return plan;
}

}  // namespace berth::http
