// Planning a request: its row's checks (the web UI turned off, what the node agent serves), every
// part of its path against its grammar, ?ns= resolved, its caller authenticated (authenticate.cpp),
// then the row's handler.
#include "dispatch.hpp"

#include <algorithm>

#include "authenticate.hpp"
#include "berth/registry/registry.hpp"
#include "responses.hpp"

namespace berth::http {
namespace {

using oci::Error;
using oci::ErrorCode;

// No script but the UI's own files, no inline script or eval, no framing: attacker-chosen strings
// in manifests can at worst be text on the page.
constexpr const char* content_security_policy =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'";

Plan routed(Context& context, Request& request) {
    const auto& route = *request.target.route;
    auto& registry = context.services.registry;
    if (route.has(ui) && !context.options.ui.enabled)
        throw Error(ErrorCode::name_unknown, "the web UI is turned off (ui.enabled)");
    if (registry.options().pull_only && !route.has(agent))
        throw Error(ErrorCode::name_unknown, "the node agent serves pulls only: ask the registry");
    require_valid_parts(request.target, request.method == Method::put);
    // Registry proxying (spec main): ?ns=HOST names the repository HOST/NAME.
    std::optional<std::string> ns;
    if (route.names_repository()) {
        ns = request.target.query.get("ns");
        const bool read = request.method == Method::get || request.method == Method::head;
        request.target.name = registry.repository_of(request.target.name, ns, read);
    }
    if (auto refusal = authenticate(context, request)) return immediate(std::move(*refusal));
    auto plan = route.handler(context, request);
    if (ns)
        plan.finish = [finish = std::move(plan.finish), ns = *ns](std::string& body, std::uint64_t offset) {
            auto response = finish(body, offset);
            response.set("OCI-Namespace", ns);
            return response;
        };
    return plan;
}

}  // namespace

Response with_ui_headers(Response response) {
    response.set("Content-Security-Policy", content_security_policy);
    response.set("X-Content-Type-Options", "nosniff");
    response.set("X-Frame-Options", "DENY");
    response.set("Referrer-Policy", "no-referrer");
    const bool cache_said = std::any_of(response.headers.begin(), response.headers.end(),
                                        [](const auto& header) { return header.first == "Cache-Control"; });
    if (!cache_said) response.set("Cache-Control", "no-store");
    return response;
}

Plan plan_request(Context& context, Request& request) {
    if (!request.target.route->has(ui)) return routed(context, request);
    // Every answer under /ui/, errors too, carries the UI's headers.
    try {
        auto plan = routed(context, request);
        plan.finish = [finish = std::move(plan.finish)](std::string& body, std::uint64_t offset) {
            return with_ui_headers(finish(body, offset));
        };
        return plan;
    } catch (const Error& error) {
        return immediate(with_ui_headers(error_response(error)));
    }
}

}  // namespace berth::http
