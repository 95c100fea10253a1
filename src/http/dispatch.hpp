#pragma once
// How the session plans a request (dispatch.cpp); the route table (routes.cpp) says the rest.
#include "message.hpp"

namespace berth::http {

Plan plan_request(Context& context, Request& request);

// The web UI's headers: a strict Content-Security-Policy, no sniffing, no framing, no referrer,
// and no caching unless the response says otherwise (the UI's files).
Response with_ui_headers(Response response);

}  // namespace berth::http
