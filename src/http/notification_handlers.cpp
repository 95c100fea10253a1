// /_berth/v1/notifications: the endpoints' state, their dead letters, replay and re-enabling, for
// operators (notifications.operators); and the progress replicas tell each other (notify/).
#include <chrono>
#include <nlohmann/json.hpp>

#include "berth/auth/authorizer.hpp"
#include "berth/notify/notifications.hpp"
#include "berth/oci/error.hpp"
#include "berth/oci/json.hpp"
#include "responses.hpp"

namespace berth::http {
namespace {

using oci::Error;
using oci::ErrorCode;

notify::Notifications& notifications_of(Context& context) {
    auto* notifications = context.services.operations.notifications;
    if (!notifications) throw Error(ErrorCode::name_unknown, "no notification endpoints are configured");
    return *notifications;
}

void require_operator(Context& context, const Request& request, const notify::Notifications& notifications) {
    const auto* authorizer = context.services.access.authorizer;
    if (!authorizer || authorizer->is_one_of(caller_of(request), notifications.options().operators)) return;
    throw Error(ErrorCode::denied, "only notifications.operators may see or change notification endpoints");
}

std::string status_json(const std::vector<notify::EndpointStatus>& endpoints) {
    auto list = nlohmann::json::array();
    for (auto& e : endpoints)
        list.push_back({{"name", e.name},
                        {"delivering", e.delivering},
                        {"disabled", e.disabled},
                        {"disabled_reason", e.disabled_reason},
                        {"lag", {{"events", e.lag_events}, {"seconds", e.lag_seconds}}},
                        {"last_error", e.last_error},
                        {"delivered", e.delivered},
                        {"failed", e.failed},
                        {"retried", e.retried},
                        {"dead_lettered", e.dead_lettered},
                        {"pull_counts", {{"waiting", e.pulls_waiting}, {"dropped", e.pulls_dropped}}}});
    return nlohmann::json{{"endpoints", list}}.dump();
}

std::uint64_t number_param(const Query& query, const char* name, std::uint64_t fallback) {
    auto text = query.get(name);
    if (!text) return fallback;
    try {
        std::size_t used = 0;
        auto value = std::stoull(*text, &used);
        if (used == text->size() && !text->empty() && std::isdigit(static_cast<unsigned char>((*text)[0])))
            return value;
    } catch (const std::exception&) {}
    throw Error(ErrorCode::bad_request, std::string(name) + " must be a whole number");
}

Plan dead_letters_answer(notify::Notifications& notifications, const std::string& name, const Query& query) {
    constexpr std::size_t max_page = 1000;
    const auto skip = number_param(query, "skip", 0);
    const auto n = std::min<std::uint64_t>(number_param(query, "n", 100), max_page);
    auto lines = notifications.dead_letters(name, skip, n);
    if (!lines) throw Error(ErrorCode::name_unknown, "no notification endpoint is named " + name);
    auto events = nlohmann::json::array();
    for (auto& line : *lines) events.push_back(oci::parse_json(line));
    return immediate(json_response(200, nlohmann::json{{"endpoint", name}, {"events", events}}.dump()));
}

}  // namespace

Plan plan_notify_progress(Context& context, Request& request) {
    if (request.method != Method::get) not_allowed();
    auto* notifications = context.services.operations.notifications;
    return immediate(json_response(200, notifications ? notifications->progress_text() : "{}"));
}

std::string notifications_status(Context& context, const Request& request) {
    auto* notifications = context.services.operations.notifications;
    if (!notifications) return status_json({});
    require_operator(context, request, *notifications);
    return status_json(notifications->status());
}

Plan plan_notifications(Context& context, Request& request) {
    if (request.method != Method::get && request.method != Method::head) not_allowed();
    notifications_of(context);
    return immediate(json_response(200, notifications_status(context, request)));
}

// {name}/dead-letters (GET, ?skip=&n=, newest first), {name}/replay?since=UNIX-SECONDS (POST),
// {name}/enable (POST).
Plan plan_notification_endpoint(Context& context, Request& request) {
    auto& notifications = notifications_of(context);
    require_operator(context, request, notifications);
    const std::string& rest = request.target.reference;
    const auto slash = rest.find('/');
    const auto name = rest.substr(0, slash), what = slash == std::string::npos ? "" : rest.substr(slash + 1);
    const auto& query = request.target.query;
    if (what == "dead-letters") {
        if (request.method != Method::get && request.method != Method::head) not_allowed();
        return dead_letters_answer(notifications, name, query);
    }
    if (request.method != Method::post) not_allowed();
    bool known = false;
    if (what == "replay") {
        if (!query.get(notify::replay_since))
            throw Error(ErrorCode::bad_request, "replay needs ?since= (Unix seconds)");
        const auto since = number_param(query, notify::replay_since, 0);
        const auto now =
            std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                .count();
        // A time ahead of now (milliseconds given for seconds, say) would mark everything sent.
        if (since > static_cast<std::uint64_t>(now) + 60)
            throw Error(ErrorCode::bad_request, "since must be a time in the past, in Unix seconds");
        known = notifications.replay(name, since * 1000);
    } else if (what == "enable") {
        known = notifications.enable(name);
    } else {
        throw Error(ErrorCode::name_unknown, "no such notification operation: " + what);
    }
    if (!known) throw Error(ErrorCode::name_unknown, "no notification endpoint is named " + name);
    return immediate(status_only(202));
}

}  // namespace berth::http
