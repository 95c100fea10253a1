#pragma once
// What several handlers answer with: plain answers, errors, pages, who asked.
#include <cstddef>
#include <functional>
#include <optional>
#include <string>

#include "berth/registry/upstreams.hpp"
#include "message.hpp"

namespace berth::registry {
class Registry;
}  // namespace berth::registry

namespace berth::http {

// A plan that answers at once, on the I/O thread.
Plan immediate(Response response);
Response json_response(int status, std::string body, std::string content_type = "application/json");
Response status_only(int status);
[[noreturn]] void not_allowed();
// Who a request counts against for per-client limits: the user, else the address.
std::string client_of(const Request& request);
// Pushes and deletes, with who did them, for the audit trail.
void audit(const Request& request, const char* action, const std::string& reference);
// A request that stores a blob waits on where blob bytes live: when that is another party (a
// bucket), it is planned on a pool of its own for that party's writes, never on the shared
// workers nor beside its reads (net/reach.hpp).
void reach_blob_store(const registry::Registry& registry);
// A listing's ?n=; nullopt when absent (the registry's default page).
std::optional<std::size_t> page_size(const Query& query);
// A Link header to the page after `last` of a listing at `path` (oci/paths.hpp).
std::string next_link(const std::string& path, std::size_t n, const std::string& last);
// The request's caller as the authorizer found it.
auth::Decision caller_of(const Request& request);
// A peer reading through on behalf of its client fetches itself rather than delegate again.
registry::Asker asker_of(bool from_peer);
// What a request's caller may pull (null: everything, when nobody is asked): its token's access
// list when it presented one, else the rules for its principal.
std::function<bool(const std::string& repo)> may_pull_of(const Context& context, const Request& request);
// What a request's caller may see named in a listing behind the registry:catalog:* grant
// (/v2/_catalog, /_berth/v1/usage): Authorizer::may_list.
std::function<bool(const std::string& repo)> may_list_of(const Context& context, const Request& request);
// A page of namespace usage as JSON ({"namespaces":[...],"next"}), filtered to the namespaces
// whose every repository the caller may pull (may_pull null: all); GET /_berth/v1/usage and the
// web UI's namespaces view (usage_handlers.cpp).
struct UsageAnswer {
    std::string body;
    std::size_t read = 0;             // the page's size
    std::optional<std::string> next;  // where the next page starts, when more follow
};
UsageAnswer usage_answer(registry::Registry& registry, const std::function<bool(const std::string&)>& may_pull,
                         const Cursors& cursors, std::optional<std::size_t> n, const std::string& last);

}  // namespace berth::http
