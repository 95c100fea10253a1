#pragma once
// What several handlers answer with: plain answers, errors, pages, who asked.
#include <cstddef>
#include <optional>
#include <string>

#include "berth/registry/upstreams.hpp"
#include "handlers.hpp"

namespace berth::http {

Response status_only(int status);
[[noreturn]] void not_allowed();
// Who a request counts against for per-client limits: the user, else the address.
std::string client_of(const Request& request);
// Pushes and deletes, with who did them, for the audit trail.
void audit(const Request& request, const char* action, const std::string& reference);
// A listing's ?n=; nullopt when absent (the registry's default page).
std::optional<std::size_t> page_size(const Query& query);
// A Link header to the page after `last` of a listing at `path` (oci/paths.hpp).
std::string next_link(const std::string& path, std::size_t n, const std::string& last);
// A peer reading through on behalf of its client fetches itself rather than delegate again.
registry::Asker asker_of(bool from_peer);

}  // namespace berth::http
