#pragma once
// Who is asking, and whether they may: decided once, from the route's row (routes.hpp).
#include <optional>

#include "berth/auth/delegated.hpp"
#include "message.hpp"

namespace berth::http {

// Nothing when the request may go on (its principal, token and from_peer then set); otherwise the
// refusal to answer (401 with its challenge, 403, 429, 503). Throws the spec's errors.
std::optional<Response> authenticate(Context& context, Request& request);

// The node agent's refusal of a read the replicas refuse the caller, asked with the caller's own
// credentials (agent_handlers.cpp); nothing when they allow it.
std::optional<Response> delegated_refusal(auth::DelegatedAccess& door, const Request& request);

}  // namespace berth::http
