// The paths berth builds from what a client sent and sends on to another server: the node agent's
// question to the replicas (auth::access_target) and an upload request forwarded to the replica
// owning its session (forwarded_upload_target), and the /v2/ paths of oci::path. Whatever the
// request target, once its route passed require_valid_parts, a path built from it parses back to
// the very same route (kind, name, reference, digest): no decoded '/', '?' or '#' can make it name
// another resource.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "berth/auth/delegated.hpp"
#include "berth/oci/error.hpp"
#include "berth/oci/paths.hpp"
#include "fuzz_check.hpp"
#include "http/router.hpp"

namespace {

using namespace berth;
using http::RouteKind;

bool valid(const http::Route& route, bool put) {
    try {
        http::require_valid_parts(route, put);
        return true;
    } catch (const oci::Error&) {
        return false;
    }
}

// A built path routes to kind, with name and reference as they were.
void routes_back(const std::string& built, RouteKind kind, const std::string& name, const std::string& reference) {
    auto parsed = http::parse_target(built);
    FUZZ_CHECK(parsed.has_value());
    FUZZ_CHECK(parsed->route.kind == kind);
    FUZZ_CHECK(parsed->route.name == name);
    FUZZ_CHECK(parsed->route.reference == reference);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    auto target = http::parse_target(text);
    if (!target) return 0;
    const auto& route = target->route;
    const bool read_valid = valid(route, false), put_valid = valid(route, true);
    // A PUT's rule is a read's with another error: both pass or both fail.
    FUZZ_CHECK(read_valid == put_valid);
    if (!read_valid || !http::route_spec(route.kind).repository) return 0;
    // The agent asks about the repository, and only it.
    routes_back(auth::access_target(route.name), RouteKind::access, route.name, "");
    switch (route.kind) {
        case RouteKind::upload: {
            const auto forwarded = http::forwarded_upload_target(*target);
            routes_back(forwarded, RouteKind::upload, route.name, route.reference);
            FUZZ_CHECK(http::parse_target(forwarded)->query.get("digest") == target->query.get("digest"));
            break;
        }
        case RouteKind::manifest:
            routes_back(oci::path::manifest(route.name, route.reference), route.kind, route.name, route.reference);
            break;
        case RouteKind::blob:
            routes_back(oci::path::blob(route.name, route.reference), route.kind, route.name, route.reference);
            break;
        case RouteKind::referrers:
            routes_back(oci::path::referrers(route.name, route.reference), route.kind, route.name, route.reference);
            break;
        case RouteKind::tags: routes_back(oci::path::tags(route.name), route.kind, route.name, ""); break;
        case RouteKind::upload_start: routes_back(oci::path::uploads(route.name), route.kind, route.name, ""); break;
        default: break;
    }
    return 0;
}
