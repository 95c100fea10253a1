// The one place a request's caller is authenticated and authorized, from its route's row
// (routes.hpp): how callers of the route prove who they are, and what the rules must let them do.
#include "authenticate.hpp"

#include "berth/auth/authorizer.hpp"
#include "berth/auth/delegated.hpp"
#include "berth/oci/encoding.hpp"
#include "berth/replication/peer_service.hpp"
#include "berth/replication/protocol.hpp"
#include "responses.hpp"
#include "berth/ui/sessions.hpp"

namespace berth::http {
namespace {

using oci::Error;
using oci::ErrorCode;
namespace protocol = replication::protocol;

// What a request needs to be allowed: the row's action for its method, and for a mount, pull on
// the repository it mounts from.
std::vector<auth::Need> needs_of(const Request& request) {
    const auto& target = request.target;
    const auto& route = *target.route;
    const auto needs = request.method == Method::get || request.method == Method::head ? route.read
                       : request.method == Method::del                                 ? route.del
                                                                                       : route.write;
    if (needs == Needs::none) return {};
    const auto action = needs == Needs::pull   ? auth::Action::pull
                        : needs == Needs::push ? auth::Action::push
                                               : auth::Action::del;
    if (!route.names_repository()) return {auth::Need{{}, action, true}};
    std::vector<auth::Need> out{{target.name, action, false}};
    if (route.has(mounts))
        if (auto from = target.query.get("from"); from && target.query.get("mount"))
            out.push_back({*from, auth::Action::pull, false});
    return out;
}

bool peer_authorized(const Context& context, const Request& request) {
    return context.services.peers && context.services.peers->authorized(request.peer_secret);
}

// A replica that speaks no protocol version this one does is refused, not misunderstood.
void require_compatible_peer(const Request& request) {
    auto versions = protocol::parse_versions(request.peer_versions);
    if (!versions) throw Error(ErrorCode::bad_request, "malformed peer protocol versions");
    if (!protocol::compatible(*versions))
        throw Error(ErrorCode::bad_request, "incompatible peer protocol", protocol::incompatibility(*versions));
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

std::optional<Response> registry_caller(Context& context, Request& request) {
    const auto& access = context.services.access;
    // The node agent's listener for fellow agents: only they get through its TLS handshake (a
    // client certificate agent.peers.ca_file signed), and they read blobs and manifests only.
    if (context.options.agent_peer_listener) {
        if (!request.certified) throw Error(ErrorCode::denied, "only node agents read here");
        if ((request.method != Method::get && request.method != Method::head) || !request.target.route->has(peer_reads))
            throw Error(ErrorCode::denied, "fellow agents read blobs and manifests only");
        request.from_peer = true;
        return std::nullopt;
    }
    // What a replica may read of another on the cluster's word alone: the blobs and manifests a
    // fetch for the whole cluster streams from the replica that owns it, which the peer API gives
    // any replica anyway. Every write and every upload request is authorized as its client's own,
    // forwarded or not.
    request.from_peer = request.forwarded && request.target.route->has(peer_reads) &&
                        (request.method == Method::get || request.method == Method::head) &&
                        peer_authorized(context, request);
    if (request.from_peer) {
        require_compatible_peer(request);
        return std::nullopt;
    }
    if (access.delegated) return delegated_refusal(*access.delegated, request);
    if (!access.authorizer || !access.authorizer->enabled()) return std::nullopt;
    auto decision = access.authorizer->check(request.authorization, needs_of(request), request.host, request.secure);
    if (!decision.allowed) return refusal(decision);
    request.principal = std::move(decision.principal);
    request.token = std::move(decision.token);
    return std::nullopt;
}

// The web UI's caller: a session (which ends with the credential it came from: an htpasswd user
// removed, a new password), else the request's own credentials (scripts; a token's access list then
// decides, as on /v2/), else anonymous.
std::optional<Response> ui_caller(Context& context, Request& request) {
    const auto* authorizer = context.services.access.authorizer;
    if (!authorizer || !authorizer->enabled()) return std::nullopt;
    if (auto session = context.sessions.session(request.cookie);
        session && authorizer->credential_current(session->principal, session->generation)) {
        request.principal = std::move(session->principal);
        return std::nullopt;
    }
    if (request.authorization.empty()) return std::nullopt;
    auto decision = authorizer->check(request.authorization, {}, request.host, request.secure);
    if (!decision.allowed) throw Error(ErrorCode::unauthorized, decision.message);
    request.principal = std::move(decision.principal);
    request.token = std::move(decision.token);
    return std::nullopt;
}

std::optional<Response> backup_caller(const Context& context, const Request& request) {
    const auto& secret = context.options.backup_secret;
    if (!context.services.operations.backups || secret.empty())
        throw Error(ErrorCode::unsupported, "this server takes no backups on request (backup.secret_file)");
    if (oci::equal_secrets(request.authorization, "Bearer " + secret)) return std::nullopt;
    auto response = error_response(ErrorCode::unauthorized, "the backup secret is required");
    response.set("WWW-Authenticate", "Bearer realm=\"berth-backup\"");
    return response;
}

}  // namespace

std::optional<Response> authenticate(Context& context, Request& request) {
    switch (request.target.route->auth) {
        case Auth::none: return std::nullopt;
        case Auth::registry: return registry_caller(context, request);
        case Auth::ui: return ui_caller(context, request);
        case Auth::backup: return backup_caller(context, request);
        case Auth::agent:
            if (!request.certified)
                throw Error(ErrorCode::denied, "node agents present their certificate (one naming berth-agent)");
            return std::nullopt;
        case Auth::peer:
            if (!peer_authorized(context, request))
                return error_response(ErrorCode::unauthorized, "peer authentication required");
            require_compatible_peer(request);
            return std::nullopt;
    }
    return std::nullopt;
}

}  // namespace berth::http
