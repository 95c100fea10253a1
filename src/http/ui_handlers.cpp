// The web UI's routes (src/ui is the UI itself): its files, sign-in and sign-out, and its JSON
// views. Every URL it hands out is relative, so it works below any path prefix a proxy adds;
// dispatch.cpp gives every answer under /ui the UI's headers. Who may see what follows /v2/'s
// rules: the caller (authenticate.cpp: a session, else the request's own credentials, else
// anonymous) sees the repositories it may pull, and nothing says a hidden one exists.
#include "berth/auth/authorizer.hpp"
#include "berth/net/reach.hpp"
#include "berth/oci/names.hpp"
#include "berth/registry/registry.hpp"
#include "berth/ui/files.hpp"
#include "berth/ui/sign_in.hpp"
#include "berth/ui/views.hpp"
#include "cursors.hpp"
#include "responses.hpp"

namespace berth::http {

std::string notifications_status(Context& context, const Request& request);  // notification_handlers.cpp

using oci::Error;
using oci::ErrorCode;

namespace {

constexpr std::size_t max_login_bytes = 4096;

Response see_other(const std::string& location, const std::string& cookie = {}) {
    auto response = status_only(303);
    response.set("Location", location);
    if (!cookie.empty()) response.set("Set-Cookie", cookie);
    return response;
}

Plan file(std::string_view path, const Request& request) {
    if (request.method != Method::get && request.method != Method::head) not_allowed();
    const auto* file = ui::find_file(path);
    if (!file) throw Error(ErrorCode::name_unknown, "no such page", std::string(path));
    Response response;
    response.set("Content-Type", ui::content_type_of(path));
    response.set("Cache-Control", "no-cache");  // kept, but asked again after an upgrade
    if (request.method == Method::head) response.head_length = file->body.size();
    else response.body = std::string(file->body);
    return immediate(std::move(response));
}

bool auth_enabled(const Context& context) {
    const auto* authorizer = context.services.access.authorizer;
    return authorizer && authorizer->enabled();
}

// A view answers GET and HEAD alike, with JSON.
template <typename Render>
Plan view(const Request& request, Render render) {
    if (request.method != Method::get && request.method != Method::head) not_allowed();
    return immediate(json_response(200, render()));
}

std::size_t page_of(const Query& query, std::size_t fallback) { return page_size(query).value_or(fallback); }

// The repository a view's ?name= names. A malformed name is 400 whoever asks; one the caller may
// not pull does not exist for it (signed in), or may appear once signed in (anonymous).
std::string repository_of(const Context& context, const Request& request) {
    auto name = request.target.query.get("name").value_or("");
    if (!oci::valid_repository_name(name)) throw Error(ErrorCode::name_invalid, "invalid repository name", name);
    if (auto may_pull = may_pull_of(context, request); may_pull && !may_pull(name)) {
        if (request.principal.anonymous()) throw Error(ErrorCode::unauthorized, "sign in to see this repository", name);
        throw Error(ErrorCode::name_unknown, "repository unknown", name);
    }
    return name;
}

// Upstream addresses and errors, replica addresses and backup failures are for those signed in.
void require_signed_in(const Context& context, const Request& request, const char* what) {
    if (auth_enabled(context) && request.principal.anonymous())
        throw Error(ErrorCode::unauthorized, std::string("sign in to see ") + what);
}

}  // namespace

// /ui: into the UI's folder, so its relative URLs resolve.
Plan plan_ui_enter(Context&, Request&) { return immediate(see_other("ui/")); }

Plan plan_ui_file(Context&, Request& request) {
    const std::string_view path = request.target.reference;
    return file(path.empty() ? std::string_view("index.html") : path, request);
}

Plan plan_ui_login(Context& context, Request& request) {
    if (request.method != Method::post) return file("login.html", request);
    const ui::FormSource source{request.origin,         request.fetch_site, request.host,
                                request.forwarded_host, request.secure,     request.peer_address};
    ui::require_same_origin(source);
    // A directory's sign-in waits on the directory: on its own pool, never the workers'.
    const auto* authorizer = context.services.access.authorizer;
    if (authorizer && authorizer->uses_directory()) net::reach(net::ldap_party);
    Plan plan;
    plan.body = Plan::Body::buffer;
    plan.buffer_limit = max_login_bytes;
    plan.finish = [&context, source](std::string& body, std::uint64_t) {
        const auto form = Query::parse(body);
        auto answer = ui::sign_in(context.services.access.authorizer, context.sessions, source,
                                  form.get("username").value_or(""), form.get("password").value_or(""));
        return see_other(answer.location, answer.cookie);
    };
    return plan;
}

Plan plan_ui_logout(Context&, Request& request) {
    if (request.method != Method::post) not_allowed();
    return immediate(see_other("./", ui::Sessions::sign_out(request.secure)));
}

Plan plan_ui_whoami(Context& context, Request& request) {
    return view(request, [&] {
        const auto& principal = request.principal;
        return ui::whoami_json(principal.anonymous() ? std::nullopt : std::optional(principal.name),
                               auth_enabled(context), context.options.ui.registry_host);
    });
}

Plan plan_ui_repositories(Context& context, Request& request) {
    return view(request, [&] {
        const auto& query = request.target.query;
        const auto& cursors = context.cursors;
        return ui::repositories_json(
            context.services.registry.contents(),
            {query.get("q").value_or(""), cursors.open(query.get("last").value_or("")), page_of(query, 50),
             [&](const std::string& name) { return cursors.next(name, false); }},
            may_pull_of(context, request));
    });
}

Plan plan_ui_repository(Context& context, Request& request) {
    return view(request, [&] {
        return ui::repository_json(context.services.registry.contents(),
                                   {repository_of(context, request), request.target.query.get("last").value_or(""),
                                    page_of(request.target.query, 100)});
    });
}

Plan plan_ui_manifest(Context& context, Request& request) {
    return view(request, [&] {
        return ui::manifest_json(context.services.registry.contents(), repository_of(context, request),
                                 request.target.query.get("reference").value_or(""), may_pull_of(context, request));
    });
}

Plan plan_ui_mirrors(Context& context, Request& request) {
    return view(request, [&] {
        require_signed_in(context, request, "the mirrors");
        return ui::mirrors_json(context.services.registry.contents(), may_pull_of(context, request));
    });
}

Plan plan_ui_namespaces(Context& context, Request& request) {
    return view(request, [&] {
        const auto& query = request.target.query;
        return usage_answer(context.services.registry, may_pull_of(context, request), context.cursors,
                            page_of(query, 50), query.get("last").value_or(""))
            .body;
    });
}

Plan plan_ui_retention(Context& context, Request& request) {
    return view(request, [&] {
        const auto repo = repository_of(context, request);
        context.services.registry.contents().require_repository(repo);
        return ui::retention_json(context.services.operations.retention, repo);
    });
}

Plan plan_ui_cluster(Context& context, Request& request) {
    return view(request, [&] {
        require_signed_in(context, request, "the cluster");
        const auto& registry = context.services.registry;
        return ui::cluster_json(registry.options().replica_id, registry.change_log(), context.services.peers,
                                context.services.operations.backups);
    });
}

Plan plan_ui_notifications(Context& context, Request& request) {
    return view(request, [&] {
        require_signed_in(context, request, "the notification endpoints");
        return notifications_status(context, request);
    });
}

// A view the UI does not have, once its caller is known: a wrong password is 401 on every view.
Plan plan_ui_no_view(Context&, Request& request) {
    return view(request, [&]() -> std::string {
        throw Error(ErrorCode::name_unknown, "no such view", request.target.reference);
    });
}

}  // namespace berth::http
