// The peer API that replicas use among themselves: its formats are
// replication/protocol.hpp's, its answers replication::PeerService's.

#include "berth/replication/peer_service.hpp"
#include "berth/replication/protocol.hpp"
#include "responses.hpp"

namespace berth::http {
namespace {

using oci::Error;
using oci::ErrorCode;
namespace protocol = replication::protocol;
using protocol::Operation;

[[noreturn]] void not_found() { throw Error(ErrorCode::blob_unknown, "not held by this replica"); }

protocol::Query query_of(const Request& request) {
    return [&query = request.target.query](std::string_view name) { return query.get(name); };
}

Plan blob_answer(const replication::PeerService& peers, std::string_view path) {
    auto blob = peers.blob_file(std::string(protocol::content_digest(path)));
    if (!blob) not_found();
    Response response{200, {}, {}, {}, {}};
    response.set("Content-Type", "application/octet-stream");
    const auto size = blob->size();
    response.file = FileBody{std::make_shared<const storage::OpenBlob>(std::move(*blob)), 0, size};
    return immediate(std::move(response));
}

Plan apply_plan(replication::PeerService& peers, const Request& request) {
    Plan plan;
    plan.body = Plan::Body::buffer;
    plan.buffer_limit = 16 << 20;
    plan.finish = [&peers, origin = request.peer_origin](std::string& body, std::uint64_t) {
        auto pushed = protocol::parse_apply(body);
        if (!pushed) throw Error(ErrorCode::bad_request, "apply needs a body of well-formed events");
        peers.apply_pushed(origin, *pushed);
        return json_response(200, "{}");
    };
    return plan;
}

Plan claim_plan(replication::PeerService& peers) {
    Plan plan;
    plan.body = Plan::Body::buffer;
    plan.buffer_limit = 64 << 10;
    plan.finish = [&peers](std::string& body, std::uint64_t) {
        auto claim = protocol::parse_claim(body);
        if (!claim) throw Error(ErrorCode::bad_request, "claim needs a repository, a tag and a digest");
        return json_response(200, protocol::encode_claim_answer(peers.answer_claim(*claim)));
    };
    return plan;
}

Plan peer_operation(replication::PeerService& peers, Request& request) {
    const auto& path = request.target.reference;
    const auto query = query_of(request);
    const bool get = request.method == Method::get || request.method == Method::head;
    const auto operation = protocol::operation_of(path);
    if (request.method == Method::post && operation == Operation::apply) return apply_plan(peers, request);
    if (request.method == Method::post && operation == Operation::claim) return claim_plan(peers);
    if (!get) throw Error(ErrorCode::unsupported, "no such peer operation");
    switch (operation) {
        case Operation::log: {
            auto [status, body] = peers.log_json(protocol::parse_log_query(query), request.peer_origin);
            return immediate(json_response(status, std::move(body)));
        }
        case Operation::state:
            try {
                return immediate(
                    json_response(200, peers.state_json(protocol::parse_state_query(query), request.peer_origin)));
            } catch (const std::invalid_argument& error) {
                throw Error(ErrorCode::bad_request, error.what());
            }
        case Operation::status: return immediate(json_response(200, peers.status_json()));
        case Operation::blob: return blob_answer(peers, path);
        case Operation::manifest: {
            auto content = peers.manifest_content(protocol::manifest_repository(query),
                                                  std::string(protocol::content_digest(path)));
            if (!content) not_found();
            Response response{200, {}, std::move(content->second), {}, {}};
            response.set("Content-Type", content->first);
            return immediate(std::move(response));
        }
        case Operation::record: {
            auto asked = protocol::parse_record_query(query);
            if (!asked) throw Error(ErrorCode::bad_request, "record needs link, manifest or tag");
            auto record = peers.record_json(*asked);
            if (!record) not_found();
            return immediate(json_response(200, *record));
        }
        case Operation::pulls:
            return immediate(json_response(200, peers.pulls_json(protocol::parse_pulls_query(query))));
        case Operation::apply:
        case Operation::claim:
        case Operation::unknown: break;
    }
    throw Error(ErrorCode::unsupported, "no such peer operation");
}

}  // namespace

// The peer API (replication/protocol.hpp): its caller authenticated as a replica (Auth::peer).
Plan plan_peer(Context& context, Request& request) {
    auto plan = peer_operation(*context.services.peers, request);
    plan.finish = [finish = std::move(plan.finish)](std::string& body, std::uint64_t offset) {
        auto response = finish(body, offset);
        response.set(protocol::header::versions, protocol::versions_text());
        return response;
    };
    return plan;
}

}  // namespace berth::http
