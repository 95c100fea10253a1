// The paths berth builds from what a client sent and sends on to another server: the node agent's
// question to the replicas (auth::access_target) and an upload request forwarded to the replica
// owning its session (forwarded_upload_target), and the /v2/ paths of oci::path. Whatever the
// request target, once its route passed require_valid_parts, a path built from it parses back to
// the very same route (row, name, reference, digest): no decoded '/', '?' or '#' can make it name
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

bool valid(const http::Target& target, bool put) {
    try {
        http::require_valid_parts(target, put);
        return true;
    } catch (const oci::Error&) {
        return false;
    }
}

// A built path routes to the row labelled `label`, with name and reference as they were.
void routes_back(const std::string& built, std::string_view label, const std::string& name,
                 const std::string& reference) {
    auto parsed = http::parse_target(built);
    FUZZ_CHECK(parsed.has_value());
    FUZZ_CHECK(parsed->route->label == label);
    FUZZ_CHECK(parsed->name == name);
    FUZZ_CHECK(parsed->reference == reference);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    auto target = http::parse_target(text);
    if (!target) return 0;
    const bool read_valid = valid(*target, false), put_valid = valid(*target, true);
    // A PUT's rule is a read's with another error: both pass or both fail.
    FUZZ_CHECK(read_valid == put_valid);
    const auto& route = *target->route;
    if (!read_valid || !route.names_repository()) return 0;
    const auto& name = target->name;
    const auto& reference = target->reference;
    // The agent asks about the repository, and only it.
    routes_back(auth::access_target(name), "access", name, "");
    const auto label = route.label;
    if (label == "upload") {
        const auto forwarded = http::forwarded_upload_target(*target);
        routes_back(forwarded, label, name, reference);
        FUZZ_CHECK(http::parse_target(forwarded)->query.get("digest") == target->query.get("digest"));
    } else if (label == "manifest") {
        routes_back(oci::path::manifest(name, reference), label, name, reference);
    } else if (label == "blob") {
        routes_back(oci::path::blob(name, reference), label, name, reference);
    } else if (label == "referrers") {
        routes_back(oci::path::referrers(name, reference), label, name, reference);
    } else if (label == "tags") {
        routes_back(oci::path::tags(name), label, name, "");
    } else if (label == "upload_start") {
        routes_back(oci::path::uploads(name), label, name, "");
    }
    return 0;
}
