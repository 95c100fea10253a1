// The web UI (docs/ui.md): its files from the binary, sign-in and sign-out, and its JSON views.
// Every URL it hands out is relative, so it works below any path prefix a proxy adds. Who may see
// what follows /v2/'s rules: a session cookie, else the request's own credentials, else anonymous.
#include <nlohmann/json.hpp>

#include "berth/auth/authorizer.hpp"
#include "berth/net/reach.hpp"
#include "berth/oci/encoding.hpp"
#include "berth/oci/names.hpp"
#include "berth/observe/log.hpp"
#include "berth/registry/browse.hpp"
#include "berth/registry/registry.hpp"
#include "berth/registry/retention.hpp"
#include "handlers.hpp"
#include "cursors.hpp"
#include "responses.hpp"
#include "ui_files.hpp"
#include "ui_session.hpp"

namespace berth::http {

using oci::Error;
using oci::ErrorCode;

namespace {

// No script but the UI's own files, no inline script or eval, no framing: attacker-chosen strings
// in manifests can at worst be text on the page.
constexpr const char* content_security_policy =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'";
constexpr std::size_t max_login_bytes = 4096;

Response with_ui_headers(Response response, bool cacheable) {
    response.set("Content-Security-Policy", content_security_policy);
    response.set("X-Content-Type-Options", "nosniff");
    response.set("X-Frame-Options", "DENY");
    response.set("Referrer-Policy", "no-referrer");
    response.set("Cache-Control", cacheable ? "no-cache" : "no-store");
    return response;
}

Response see_other(const std::string& location, const std::string& cookie = {}) {
    auto response = status_only(303);
    response.set("Location", location);
    if (!cookie.empty()) response.set("Set-Cookie", cookie);
    return with_ui_headers(std::move(response), false);
}

std::string content_type_of(std::string_view path) {
    auto ends = [&](std::string_view ext) { return path.ends_with(ext); };
    if (ends(".html")) return "text/html; charset=utf-8";
    if (ends(".js")) return "text/javascript; charset=utf-8";
    if (ends(".css")) return "text/css; charset=utf-8";
    if (ends(".svg")) return "image/svg+xml";
    if (ends(".png")) return "image/png";
    return "application/octet-stream";
}

Plan file(std::string_view path, const Request& request) {
    if (request.method != Method::get && request.method != Method::head) not_allowed();
    for (auto& file : ui_files())
        if (file.path == path) {
            Response response;
            response.set("Content-Type", content_type_of(path));
            if (request.method == Method::head) response.head_length = file.body.size();
            else response.body = std::string(file.body);
            return immediate(with_ui_headers(std::move(response), true));
        }
    throw Error(ErrorCode::name_unknown, "no such page", std::string(path));
}

// Who is asking: a session, else the request's own credentials (scripts, tests; a token's access
// list then decides, as on /v2/), else anonymous.
auth::Decision caller_of(const Services& services, const Request& request) {
    auth::Decision caller;
    const auto* authorizer = services.authorizer;
    // A session ends with the credential it came from (an htpasswd user removed, a new password).
    if (auto session = services.ui_sessions->session(request.cookie);
        session && authorizer && authorizer->credential_current(session->principal, session->generation))
        caller.principal = std::move(session->principal);
    if (!caller.principal.anonymous() || request.authorization.empty() || !authorizer || !authorizer->enabled())
        return caller;
    caller = authorizer->check(request.authorization, {}, request.host, request.secure);
    if (!caller.allowed) throw Error(ErrorCode::unauthorized, caller.message);
    return caller;
}

registry::MayPull may_pull_of(const Services& services, const auth::Decision& caller) {
    const auto* authorizer = services.authorizer;
    if (!authorizer || !authorizer->enabled()) return nullptr;
    return [authorizer, caller](const std::string& repo) { return authorizer->may_pull(caller, repo); };
}

// A sign-in only from this UI's own pages: a browser says where a form came from (Sec-Fetch-Site,
// Origin), and another site's form must not sign a visitor in as someone else. Origin is compared
// with the Host the browser used (or the one a reverse proxy says it used, X-Forwarded-Host). The
// UI's pages send no referrer, so a browser may say "Origin: null" of its own form: that passes
// only with Sec-Fetch-Site saying same-origin (a sandboxed frame's form says cross-site).
void require_same_origin(const Request& request) {
    if (!request.fetch_site.empty() && request.fetch_site != "same-origin" && request.fetch_site != "none")
        throw Error(ErrorCode::denied, "a sign-in from another site is refused");
    if (request.origin.empty()) return;  // not a browser: nothing to forge a visitor's sign-in with
    if (request.origin == "null") {
        if (request.fetch_site.empty()) throw Error(ErrorCode::denied, "a sign-in from an unknown origin is refused");
        return;
    }
    const auto scheme_end = request.origin.find("://");
    const auto host = scheme_end == std::string::npos ? std::string() : request.origin.substr(scheme_end + 3);
    if (host.empty() || (host != request.host && host != request.forwarded_host))
        throw Error(ErrorCode::denied, "a sign-in from another origin is refused");
}

// A repository the caller may not pull is one it cannot see: signed in, it does not exist;
// anonymous, signing in may show it.
void require_visible(const registry::MayPull& may_pull, const auth::Principal& principal, const std::string& repo) {
    if (!may_pull || may_pull(repo)) return;
    if (principal.anonymous()) throw Error(ErrorCode::unauthorized, "sign in to see this repository", repo);
    throw Error(ErrorCode::name_unknown, "repository unknown", repo);
}

std::size_t page_of(const Query& query, std::size_t fallback) { return page_size(query).value_or(fallback); }

Plan sign_in(Services& services, Request& request) {
    require_same_origin(request);
    // A directory's login waits on the directory: on its own pool, never the workers'.
    if (services.authorizer && services.authorizer->uses_directory()) net::reach(net::ldap_party);
    Plan plan;
    plan.body = Plan::Body::buffer;
    plan.buffer_limit = max_login_bytes;
    plan.finish = [&services, request](std::string& body, std::uint64_t) {
        const auto* authorizer = services.authorizer;
        if (!authorizer || !authorizer->enabled()) return see_other("./");
        auto form = Query::parse(body);
        const auto username = form.get("username").value_or(""), password = form.get("password").value_or("");
        if (username.empty() || username.find(':') != std::string::npos) return see_other("login?failed");
        auto decision =
            authorizer->check("Basic " + oci::base64(username + ":" + password), {}, request.host, request.secure);
        const bool signed_in = decision.allowed && !decision.principal.anonymous();
        observe::log("info", "audit",
                     {{"action", signed_in ? "ui sign-in" : "ui sign-in refused"},
                      {"principal", username},
                      {"peer", request.peer_address}});
        if (!signed_in) return see_other("login?failed");
        return see_other("./", services.ui_sessions->sign_in(decision.principal, request.secure, decision.expires,
                                                             authorizer->credential_generation(decision.principal)));
    };
    return plan;
}

std::string whoami_json(const Services& services, const auth::Principal& principal) {
    const auto& host = services.ui->registry_host;
    return nlohmann::json{{"user", principal.anonymous() ? nlohmann::json(nullptr) : nlohmann::json(principal.name)},
                          {"auth", services.authorizer && services.authorizer->enabled()},
                          {"registry", host.empty() ? nlohmann::json(nullptr) : nlohmann::json(host)}}
        .dump();
}

std::string retention_json(const Services& services, const std::string& repo) {
    auto deletions = nlohmann::json::array();
    std::optional<std::string> policy;
    if (services.retention)
        policy = services.retention->preview(repo, [&](const registry::RetentionDeletion& deletion) {
            deletions.push_back(
                {{"kind", deletion.kind}, {"reference", deletion.reference}, {"reason", deletion.reason}});
        });
    return nlohmann::json{{"repository", repo},
                          {"policy", policy ? nlohmann::json(*policy) : nlohmann::json(nullptr)},
                          {"deletions", deletions}}
        .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string api_answer(Services& services, const Request& request, std::string_view view) {
    const auto& query = request.target.query;
    const auto caller = caller_of(services, request);
    const auto& principal = caller.principal;
    const auto may_pull = may_pull_of(services, caller);
    auto& registry = services.registry;
    // A malformed name is 400 whoever asks; one the caller may not pull does not exist for it.
    auto repository = [&] {
        auto name = query.get("name").value_or("");
        if (!oci::valid_repository_name(name)) throw Error(ErrorCode::name_invalid, "invalid repository name", name);
        require_visible(may_pull, principal, name);
        registry::Browse::require_repository(registry, name);
        return name;
    };
    // Upstream addresses and errors, replica addresses and backup failures are for those signed in.
    auto signed_in = [&](const char* what) {
        if (may_pull && principal.anonymous())
            throw Error(ErrorCode::unauthorized, std::string("sign in to see ") + what);
    };
    if (view == "whoami") return whoami_json(services, principal);
    if (view == "repositories") {
        const auto& cursors = *services.cursors;
        return registry::Browse::repositories(
            registry,
            {query.get("q").value_or(""), cursors.open(query.get("last").value_or("")), page_of(query, 50),
             [&](const std::string& name) { return cursors.next(name, false); }},
            may_pull);
    }
    if (view == "repository")
        return registry::Browse::repository(registry,
                                            {repository(), query.get("last").value_or(""), page_of(query, 100)});
    if (view == "manifest") {
        auto name = repository();
        return registry::Browse::manifest(registry, name, query.get("reference").value_or(""), may_pull);
    }
    if (view == "mirrors") {
        signed_in("the mirrors");
        return registry::Browse::mirrors(registry, may_pull);
    }
    if (view == "namespaces")
        return usage_answer(registry, may_pull, *services.cursors, page_of(query, 50), query.get("last").value_or(""))
            .body;
    if (view == "retention") return retention_json(services, repository());
    if (view == "cluster") {
        signed_in("the cluster");
        return cluster_json(services);
    }
    throw Error(ErrorCode::name_unknown, "no such view", std::string(view));
}

Plan plan_page(Services& services, Request& request) {
    const std::string_view path = request.target.route.reference;
    if (path.empty()) return immediate(see_other("ui/"));
    if (path == "/logout") {
        if (request.method != Method::post) not_allowed();
        return immediate(see_other("./", UiSessions::sign_out(request.secure)));
    }
    if (path == "/login")
        return request.method == Method::post ? sign_in(services, request) : file("login.html", request);
    if (path.starts_with("/api/")) {
        if (request.method != Method::get && request.method != Method::head) not_allowed();
        return immediate(with_ui_headers(json_response(200, api_answer(services, request, path.substr(5))), false));
    }
    return file(path == "/" ? std::string_view("index.html") : path.substr(1), request);
}

}  // namespace

// Every answer under /ui/, errors too, carries the UI's headers.
Plan plan_ui(Services& services, Request& request) {
    if (!services.ui || !services.ui->enabled)
        throw Error(ErrorCode::name_unknown, "the web UI is turned off (ui.enabled)");
    try {
        return plan_page(services, request);
    } catch (const Error& error) {
        return immediate(with_ui_headers(error_response(error), false));
    }
}

}  // namespace berth::http
