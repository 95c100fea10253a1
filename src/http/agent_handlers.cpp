// The node agent's door (auth/delegated.hpp): every read is first asked of the
// replicas with the caller's own credentials, and refused as they refuse it;
// /auth/token is relayed to them. The agent serves /v2/ pulls only.
// docs/node-agent.md.
#include "berth/auth/delegated.hpp"
#include "berth/net/host_port.hpp"
#include "handlers.hpp"
#include "responses.hpp"

namespace berth::http {
namespace {

using oci::ErrorCode;

ErrorCode code_of(int status) {
    if (status == 403) return ErrorCode::denied;
    if (status == 503) return ErrorCode::unavailable;
    return ErrorCode::unauthorized;
}

}  // namespace

bool agent_serves(RouteKind kind) {
    switch (kind) {
        case RouteKind::base:
        case RouteKind::catalog:
        case RouteKind::tags:
        case RouteKind::manifest:
        case RouteKind::blob:
        case RouteKind::upload_start:  // refused by the pull-only registry, with a message saying so
        case RouteKind::upload:
        case RouteKind::referrers:
        case RouteKind::token:
        case RouteKind::healthz:
        case RouteKind::readyz:
        case RouteKind::metrics: return true;
        default: return false;
    }
}

std::optional<Plan> plan_delegated(auth::DelegatedAccess& door, Request& request) {
    const auto& route = request.target.route;
    if (route.kind == RouteKind::token) {
        auto query = request.target.raw_query.empty() ? std::string() : request.target.raw_query.substr(1);
        auto relayed = door.token(request.authorization, query);
        auto response = json_response(relayed.status, std::move(relayed.body));
        if (relayed.status == 401) response.set("WWW-Authenticate", "Basic realm=\"berth\"");
        return immediate(std::move(response));
    }
    if (!route_spec(route.kind).authenticated) return std::nullopt;
    // Writes meet the agent's pull-only registry, which refuses them.
    if (request.method != Method::get && request.method != Method::head) return std::nullopt;
    // The agent's catalog would name what others pulled through it.
    if (route.kind == RouteKind::catalog)
        return immediate(error_response(ErrorCode::unsupported, "the node agent lists nothing: ask the registry"));
    const auto origin = std::string(request.secure ? "https://" : "http://") +
                        (net::plain_host(request.host) ? request.host : "localhost");
    // route.name was checked against the name grammar before routing (handlers.cpp).
    auto verdict =
        door.check(request.authorization, route_spec(route.kind).repository ? route.name : std::string(), origin);
    if (verdict.allowed()) return std::nullopt;
    auto response = error_response(code_of(verdict.status), verdict.message);
    if (!verdict.challenge.empty()) response.set("WWW-Authenticate", verdict.challenge);
    return immediate(std::move(response));
}

}  // namespace berth::http
