// GET /_berth/v1/events?after=CURSOR[&repository=GLOB][&n=]: the pollers' feed (notify/feed.hpp),
// filtered to what the caller may pull, paged with Link.
#include <nlohmann/json.hpp>

#include "berth/net/host_port.hpp"
#include "berth/notify/feed.hpp"
#include "berth/oci/error.hpp"
#include "responses.hpp"

namespace berth::http {
namespace {

using oci::Error;
using oci::ErrorCode;

constexpr std::size_t default_page = 100, max_page = 1000, max_glob = 256;

std::string next_url(const Request& request, const std::string& cursor, std::size_t n, const std::string& glob) {
    auto url =
        std::string(request.target.route->pattern) + "?after=" + net::query_escape(cursor) + "&n=" + std::to_string(n);
    if (!glob.empty()) url += "&repository=" + net::query_escape(glob);
    return url;
}

}  // namespace

Plan plan_events(Context& context, Request& request) {
    if (request.method != Method::get && request.method != Method::head) not_allowed();
    const auto* feed = context.services.operations.feed;
    if (!feed) throw Error(ErrorCode::unsupported, "this server keeps no change log to read events from");
    const auto& query = request.target.query;
    notify::FeedQuery ask;
    ask.after = query.get("after").value_or("");
    ask.repository = query.get("repository").value_or("");
    if (ask.repository.size() > max_glob)
        throw Error(ErrorCode::bad_request, "repository= is a glob of at most 256 characters");
    ask.limit = std::min(page_size(query).value_or(default_page), max_page);
    ask.may_pull = may_pull_of(context, request);
    notify::FeedPage page;
    try {
        page = feed->read(ask);
    } catch (const std::invalid_argument& bad) {
        throw Error(ErrorCode::bad_request, bad.what());
    }
    if (page.behind) {
        // The poller missed what compaction took: it is told so, with where it may start again.
        nlohmann::json body = {{"errors",
                                {{{"code", "CURSOR_EXPIRED"},
                                  {"message", "the change log no longer holds every event after this cursor"},
                                  {"detail", {{"oldest", page.cursor}}}}}},
                               {"oldest", page.cursor}};
        auto response = json_response(410, body.dump());
        response.set("Link", "<" + next_url(request, page.cursor, ask.limit, ask.repository) + ">; rel=\"first\"");
        return immediate(std::move(response));
    }
    auto events = nlohmann::json::array();
    for (auto& event : page.events) events.push_back(nlohmann::json::parse(event));
    auto response =
        json_response(200, nlohmann::json{{"events", events}, {"cursor", page.cursor}, {"more", page.more}}.dump());
    response.set("Link", "<" + next_url(request, page.cursor, ask.limit, ask.repository) + ">; rel=\"next\"");
    return immediate(std::move(response));
}

}  // namespace berth::http
