// /v2/<name>/referrers/<digest>: the referrers API.
#include "berth/oci/media_types.hpp"
#include "berth/registry/registry.hpp"
#include "responses.hpp"

namespace berth::http {

using oci::Error;
using oci::ErrorCode;
using registry::Registry;

Plan plan_referrers(Context& context, Request& request) {
    auto& registry = context.services.registry;
    if (request.method != Method::get && request.method != Method::head) not_allowed();
    const auto& route = request.target;
    auto artifact_type = request.target.query.get("artifactType").value_or("");
    auto response = json_response(200, registry.referrers(route.name, route.reference, artifact_type),
                                  std::string(oci::media_type::oci_index));
    if (!artifact_type.empty()) response.set("OCI-Filters-Applied", "artifactType");
    return immediate(std::move(response));
}

}  // namespace berth::http
