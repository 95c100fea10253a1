// /_berth/v1/lineage: what is built on a base (docs/policies.md), a page at a time.
#include <nlohmann/json.hpp>

#include "berth/http/answers.hpp"
#include "berth/net/host_port.hpp"
#include "berth/oci/names.hpp"
#include "berth/registry/registry.hpp"
#include "cursors.hpp"
#include "responses.hpp"

namespace berth::http {

using oci::Error;
using oci::ErrorCode;

std::string lineage_json(const registry::Lineage& lineage, const std::string& next_url) {
    auto derived = nlohmann::json::array();
    for (auto& d : lineage.derived)
        derived.push_back({{"repository", d.repository},
                           {"tags", d.tags},
                           {"digest", d.digest},
                           {"base_digest", d.base_digest},
                           {"current", d.current}});
    return nlohmann::json{
        {"base",
         {{"repository", lineage.repository},
          {"reference", lineage.reference},
          {"digest", lineage.digest.empty() ? nlohmann::json(nullptr) : nlohmann::json(lineage.digest)},
          {"versions", lineage.versions}}},
        {"derived", derived},
        {"next", next_url.empty() ? nlohmann::json(nullptr) : nlohmann::json(next_url)}}
        .dump();
}

// What is built on a base, a page at a time like the tag list: the base's repository must be
// pullable, and the derived images listed are those the caller may pull.
Plan plan_lineage(Context& context, Request& request) {
    const auto& registry = context.services.registry;
    const auto& cursors = context.cursors;
    if (request.method != Method::get && request.method != Method::head) not_allowed();
    const auto& query = request.target.query;
    registry::LineageQuery ask;
    ask.repository = query.get("repository").value_or("");
    ask.reference = query.get("reference").value_or("");
    if (!oci::valid_repository_name(ask.repository))
        throw Error(ErrorCode::name_invalid, "repository= must name a repository", ask.repository);
    if (!oci::valid_tag(ask.reference) && !oci::Digest::parse(ask.reference))
        throw Error(ErrorCode::manifest_invalid, "reference= must be a tag or a digest", ask.reference);
    constexpr std::size_t default_page = 100, max_page = 1000;
    ask.limit = std::min(page_size(query).value_or(default_page), max_page);
    if (auto last = query.get("last")) {
        auto cursor = registry::parse_lineage_cursor(cursors.open(*last));
        if (!cursor) throw Error(ErrorCode::bad_request, "last must be REPOSITORY@DIGEST", *last);
        ask.after = *cursor;
    }
    if (auto may_pull = may_pull_of(context, request)) {
        if (!may_pull(ask.repository))
            throw Error(ErrorCode::denied, "pulling from the base's repository is not allowed", ask.repository);
        ask.may_pull = std::move(may_pull);
    }
    auto lineage = registry.lineage(ask);
    std::string next;
    if (lineage.next) {
        next = std::string(request.target.route->pattern) + "?repository=" + net::query_escape(ask.repository) +
               "&reference=" + net::query_escape(ask.reference) + "&n=" + std::to_string(ask.limit) + "&last=" +
               net::query_escape(cursors.next(registry::lineage_cursor(*lineage.next),
                                              !ask.may_pull || ask.may_pull(lineage.next->repo)));
    }
    auto response = json_response(200, lineage_json(lineage, next));
    if (!next.empty()) response.set("Link", "<" + next + ">; rel=\"next\"");
    return immediate(std::move(response));
}

}  // namespace berth::http
