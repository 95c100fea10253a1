// What several handlers answer with: plain answers, errors, pages, who asked.
#include <charconv>
#include "berth/auth/authorizer.hpp"
#include "berth/net/host_port.hpp"
#include "berth/net/reach.hpp"
#include "berth/registry/registry.hpp"
#include "berth/observe/log.hpp"
#include "responses.hpp"
#include <nlohmann/json.hpp>

namespace berth::http {

using oci::Error;
using oci::ErrorCode;
using registry::Registry;

Plan immediate(Response response) {
    Plan plan;
    plan.blocking = false;
    plan.finish = [response = std::move(response)](std::string&, std::uint64_t) mutable { return std::move(response); };
    return plan;
}

void reach_blob_store(const Registry& registry) {
    // A pool of its own, apart from the party's reads: pushes that hang on it (a large upload, a
    // stalled bucket) hold none of the threads cold pulls wait on.
    if (auto party = registry.blob_party(); !party.empty()) net::reach(party + " writes");
}

Response json_response(int status, std::string body, std::string content_type) {
    Response response{status, {}, std::move(body), {}, {}};
    response.set("Content-Type", std::move(content_type));
    return response;
}

Response error_response(oci::ErrorCode code, const std::string& message, const std::string& detail) {
    auto response = json_response(oci::http_status(code), oci::error_json(code, message, detail));
    // A rate limit refills, sessions end and replicas come back: worth trying again soon (spec main).
    if (response.status == 429 || response.status == 503) response.set("Retry-After", "1");
    return response;
}

Response error_response(const oci::Error& error) { return error_response(error.code(), error.what(), error.detail()); }

std::string client_of(const Request& request) {
    return request.principal.anonymous() ? "ip:" + request.peer_address : "user:" + request.principal.name;
}

void audit(const Request& request, const char* action, const std::string& reference) {
    observe::log("info", "audit",
                 {{"action", action},
                  {"principal", request.principal.name},
                  {"repository", request.target.name},
                  {"reference", reference}});
}

Response status_only(int status) { return Response{status, {}, {}, {}, {}}; }

void not_allowed() { throw Error(ErrorCode::unsupported, "method not allowed on this route"); }

std::optional<std::size_t> page_size(const Query& query) {
    auto n = query.get("n");
    if (!n) return std::nullopt;
    if (n->empty() || n->find_first_not_of("0123456789") != std::string::npos)
        throw Error(ErrorCode::bad_request, "n must be a non-negative integer");
    std::size_t value = 0;
    auto [end, ec] = std::from_chars(n->data(), n->data() + n->size(), value);
    if (ec == std::errc::result_out_of_range) return SIZE_MAX;  // clamped by the registry
    return value;
}

std::string next_link(const std::string& path, std::size_t n, const std::string& last) {
    return "<" + path + "?n=" + std::to_string(n) + "&last=" + net::query_escape(last) + ">; rel=\"next\"";
}

registry::Asker asker_of(bool from_peer) { return from_peer ? registry::Asker::replica : registry::Asker::client; }

auth::Decision caller_of(const Request& request) {
    auth::Decision caller;
    caller.principal = request.principal;
    caller.token = request.token;
    return caller;
}

std::function<bool(const std::string& repo)> may_pull_of(const Context& context, const Request& request) {
    const auto* authorizer = context.services.access.authorizer;
    if (!authorizer || !authorizer->enabled()) return nullptr;
    return [authorizer, caller = caller_of(request)](const std::string& repo) {
        return authorizer->may_pull(caller, repo);
    };
}

std::function<bool(const std::string& repo)> may_list_of(const Context& context, const Request& request) {
    const auto* authorizer = context.services.access.authorizer;
    if (!authorizer || !authorizer->enabled()) return nullptr;
    return [authorizer, caller = caller_of(request)](const std::string& repo) {
        return authorizer->may_list(caller, repo);
    };
}

}  // namespace berth::http
