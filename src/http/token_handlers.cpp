// /auth/token: the built-in token endpoint (docs/auth.md); on the node agent, relayed to the
// replicas' with the caller's credentials.
#include "berth/auth/authorizer.hpp"
#include "berth/auth/delegated.hpp"
#include "responses.hpp"

namespace berth::http {

Plan plan_token(Context& context, Request& request) {
    const auto& access = context.services.access;
    if (access.delegated) {
        auto query = request.target.raw_query.empty() ? std::string() : request.target.raw_query.substr(1);
        auto relayed = access.delegated->token(request.authorization, query);
        auto response = json_response(relayed.status, std::move(relayed.body));
        if (relayed.status == 401) response.set("WWW-Authenticate", "Basic realm=\"berth\"");
        return immediate(std::move(response));
    }
    if (!access.authorizer) return immediate(error_response(oci::ErrorCode::name_unknown, "no such route"));
    auto [status, body] = access.authorizer->issue_token(
        request.authorization, request.target.query.get("service").value_or(""), request.target.query.all("scope"));
    auto response = json_response(status, std::move(body));
    if (status == 401) response.set("WWW-Authenticate", "Basic realm=\"berth\"");
    return immediate(std::move(response));
}

}  // namespace berth::http
