// /auth/token: the built-in token endpoint (docs/auth.md).
#include "berth/auth/authorizer.hpp"
#include "responses.hpp"

namespace berth::http {

Plan plan_token(const auth::Authorizer* authorizer, Request& request) {
    if (!authorizer) return immediate(error_response(oci::ErrorCode::name_unknown, "no such route"));
    auto [status, body] = authorizer->issue_token(
        request.authorization, request.target.query.get("service").value_or(""), request.target.query.all("scope"));
    auto response = json_response(status, std::move(body));
    if (status == 401) response.set("WWW-Authenticate", "Basic realm=\"berth\"");
    return immediate(std::move(response));
}

}  // namespace berth::http
