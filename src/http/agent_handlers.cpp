// The node agent's door (auth/delegated.hpp): every read is first asked of the replicas with the
// caller's own credentials, and refused as they refuse it; and the replicas' side of the question,
// /_berth/v1/access. docs/node-agent.md.
#include "authenticate.hpp"
#include "berth/net/host_port.hpp"
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

std::optional<Response> delegated_refusal(auth::DelegatedAccess& door, const Request& request) {
    // Writes meet the agent's pull-only registry, which refuses them.
    if (request.method != Method::get && request.method != Method::head) return std::nullopt;
    const auto& route = *request.target.route;
    // The agent's catalog would name what others pulled through it.
    if (!route.names_repository() && route.read != Needs::none)
        return error_response(ErrorCode::unsupported, "the node agent lists nothing: ask the registry");
    const auto origin = std::string(request.secure ? "https://" : "http://") +
                        (net::plain_host(request.host) ? request.host : "localhost");
    // The name was checked against its grammar before this (require_valid_parts).
    auto verdict = door.check(request.authorization, request.target.name, origin);
    if (verdict.allowed()) return std::nullopt;
    auto response = error_response(code_of(verdict.status), verdict.message);
    if (!verdict.challenge.empty()) response.set("WWW-Authenticate", verdict.challenge);
    return response;
}

// The node agent's question (auth/delegated.hpp): reaching here, the caller may pull.
Plan plan_access(Context&, Request& request) {
    if (request.method != Method::get && request.method != Method::head) not_allowed();
    auto response = status_only(204);
    response.set(std::string(auth::access_header), "pull");
    return immediate(std::move(response));
}

}  // namespace berth::http
