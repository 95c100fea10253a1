// The peer API that replicas use among themselves (replication/protocol.hpp).

#include <charconv>
#include <nlohmann/json.hpp>

#include "berth/replication/replicator.hpp"
#include "handlers.hpp"

namespace berth::http {
namespace {

using oci::Error;
using oci::ErrorCode;
namespace protocol = replication::protocol;
using protocol::Operation;

std::uint64_t number(const Query& query, const char* key, std::uint64_t fallback) {
    auto text = query.get(key);
    std::uint64_t value = fallback;
    if (text) std::from_chars(text->data(), text->data() + text->size(), value);
    return value;
}

[[noreturn]] void not_found() { throw Error(ErrorCode::blob_unknown, "not held by this replica"); }

}  // namespace

Plan plan_peer_request(replication::Replicator& replicator, Request& request) {
    const auto& path = request.target.route.reference;
    const auto& query = request.target.query;
    const bool get = request.method == Method::get || request.method == Method::head;
    const auto operation = protocol::operation_of(path);
    if (get && operation == Operation::log) {
        auto [status, body] =
            replicator.log_json(number(query, "after", 0), number(query, "limit", 500), request.peer_origin);
        return immediate(json_response(status, std::move(body)));
    }
    if (get && operation == Operation::state) {
        protocol::StateRequest state;
        auto part = protocol::parse_part(query.get("part").value_or(""));
        if (!part) throw Error(ErrorCode::bad_request, "state needs part=links|images|indexes|tags");
        state.part = *part;
        try {
            state.after = protocol::unhex(query.get("after").value_or(""));
        } catch (const std::invalid_argument&) {
            throw Error(ErrorCode::bad_request, "state: after must be hex");
        }
        state.limit = number(query, "limit", 1000);
        state.session = query.get("session").value_or("");
        state.since = number(query, "since", 0);
        state.summary = query.get("summary").value_or("") == "1";
        return immediate(json_response(200, replicator.state_json(state, request.peer_origin)));
    }
    if (get && operation == Operation::status) return immediate(json_response(200, replicator.status_json()));
    if (get && operation == Operation::blob) {
        auto blob = replicator.blob_file(std::string(protocol::content_digest(path)));
        if (!blob) not_found();
        Response response{200, {}, {}, {}, {}};
        response.set("Content-Type", "application/octet-stream");
        response.file = FileBody{blob->fd(), 0, blob->size(), nullptr};
        blob->release();
        return immediate(std::move(response));
    }
    if (get && operation == Operation::manifest) {
        auto content =
            replicator.manifest_content(query.get("repo").value_or(""), std::string(protocol::content_digest(path)));
        if (!content) not_found();
        Response response{200, {}, std::move(content->second), {}, {}};
        response.set("Content-Type", content->first);
        return immediate(std::move(response));
    }
    if (get && operation == Operation::record) {
        for (auto kind : {protocol::RecordKind::link, protocol::RecordKind::manifest, protocol::RecordKind::tag})
            if (auto key = query.get(protocol::record_kind_name(kind))) {
                auto record = replicator.record_json(query.get("repo").value_or(""), kind, *key);
                if (!record) not_found();
                return immediate(json_response(200, *record));
            }
        throw Error(ErrorCode::bad_request, "record needs link, manifest or tag");
    }
    if (get && operation == Operation::pulls)
        return immediate(
            json_response(200, replicator.pulls_json(query.get("repo").value_or(""), number(query, "since", 0),
                                                     query.get("after").value_or(""))));
    if (request.method == Method::post && operation == Operation::apply) {
        Plan plan;
        plan.body = Plan::Body::buffer;
        plan.buffer_limit = 16 << 20;
        plan.finish = [&replicator, origin = request.peer_origin](std::string& body, std::uint64_t) {
            auto pushed = protocol::parse_apply(body);
            if (!pushed) throw Error(ErrorCode::bad_request, "apply needs {\"events\":[...]} of well-formed events");
            replicator.apply_pushed(origin, *pushed);
            return json_response(200, "{}");
        };
        return plan;
    }
    throw Error(ErrorCode::unsupported, "no such peer operation");
}

}  // namespace berth::http
