// GET /_berth/v1/events?after=CURSOR[&repository=GLOB][&n=]: the pollers' feed (notify/feed.hpp),
// filtered to what the caller may pull, paged with Link.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <string_view>

#include "berth/auth/authorizer.hpp"
#include "berth/net/host_port.hpp"
#include "berth/notify/feed.hpp"
#include "berth/oci/error.hpp"
#include "cursors.hpp"
#include "responses.hpp"

namespace berth::http {
namespace {

using oci::Error;
using oci::ErrorCode;

constexpr std::size_t default_page = 100, max_page = 1000, max_glob = 256;
// Feed cursors are sealed (cursors.hpp) in blocks of this many bytes: what one says of changes in
// repositories the caller may not pull stays unread, and a forged one is refused.
constexpr std::size_t cursor_block = 1024, max_sealed_cursor = 16 * 1024, max_stars = 16;
// Sealed with the key that seals catalog and lineage cursors: marked, so neither passes for the other.
constexpr std::string_view cursor_mark = "events:";
static_assert(cursor_mark.size() <= 16, "the feed leaves 16 bytes of its cursor for the mark");

// A repository glob: a repository name's characters and stars.
bool valid_glob(const std::string& glob) {
    if (glob.size() > max_glob || std::count(glob.begin(), glob.end(), '*') > std::ptrdiff_t(max_stars)) return false;
    return std::all_of(glob.begin(), glob.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-' || c == '/' ||
               c == '*';
    });
}

// Who pushed or deleted is for operators (or everyone, with authentication off), not every puller.
bool may_see_principals(const Context& context, const Request& request, const notify::Feed& feed) {
    const auto* authorizer = context.services.access.authorizer;
    return !authorizer || authorizer->is_one_of(caller_of(request), feed.operators());
}

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
    if (auto after = query.get("after"); after && !after->empty()) {
        constexpr const char* refusal = "after is not a cursor this feed gave";
        ask.after = context.cursors.unseal(*after, max_sealed_cursor, refusal);
        if (!ask.after.starts_with(cursor_mark)) throw Error(ErrorCode::bad_request, refusal);
        ask.after.erase(0, cursor_mark.size());
    }
    ask.repository = query.get("repository").value_or("");
    if (!valid_glob(ask.repository))
        throw Error(ErrorCode::bad_request,
                    "repository= is a glob of at most 256 characters of a repository name and 16 stars");
    ask.limit = std::clamp<std::size_t>(page_size(query).value_or(default_page), 1, max_page);
    ask.may_pull = may_pull_of(context, request);
    ask.show_principal = may_see_principals(context, request, *feed);
    notify::FeedPage page;
    try {
        page = feed->read(ask);
        page.cursor = context.cursors.seal(std::string(cursor_mark) + page.cursor, cursor_block);
    } catch (const std::invalid_argument& bad) {
        throw Error(ErrorCode::bad_request, bad.what());
    }
    if (page.behind) {
        // The poller missed what compaction took: it is told so, with where it may go on.
        nlohmann::json body = {
            {"errors",
             {{{"code", "CURSOR_EXPIRED"},
               {"message", "the change log no longer holds every event after this cursor; go on from oldest"},
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
