// The node agent's door (auth/delegated.hpp): every read is first asked of the replicas with the
// caller's own credentials, and refused as they refuse it; and the replicas' side of the question,
// /_berth/v1/access. docs/node-agent.md.
#include <arpa/inet.h>

#include <nlohmann/json.hpp>

#include "authenticate.hpp"
#include "berth/http/agent_roster.hpp"
#include "berth/net/host_port.hpp"
#include "berth/oci/json.hpp"
#include "responses.hpp"

namespace berth::http {
namespace {

using oci::ErrorCode;

bool ip_address(const std::string& text) {
    unsigned char buffer[16];
    return ::inet_pton(AF_INET, text.c_str(), buffer) == 1 || ::inet_pton(AF_INET6, text.c_str(), buffer) == 1;
}

std::string agents_json(const AgentRoster& roster, const std::string& you) {
    nlohmann::json list = nlohmann::json::array();
    for (auto& agent : roster.agents()) list.push_back({{"address", agent.address}, {"node", agent.node}});
    nlohmann::json answer = {{"agents", std::move(list)}};
    if (!you.empty()) answer["you"] = you;
    return answer.dump();
}

// {"port": N, "node": "name"}: where the agent listens on the address this replica sees it at. It
// names no address of its own: a certificate holder could otherwise place any number of entries
// anywhere; so each address holds one agent.
AgentRoster::Agent agent_told(const std::string& body, const std::string& seen_from) {
    auto told = oci::parse_json(body);
    if (!told.is_object() || !told.contains("port") || !told["port"].is_number_unsigned() ||
        told["port"].get<std::uint64_t>() < 1 || told["port"].get<std::uint64_t>() > 65535)
        throw oci::Error(ErrorCode::bad_request, "an agent tells its port (1-65535)");
    if (!ip_address(seen_from)) throw oci::Error(ErrorCode::bad_request, "no address to list the agent at");
    AgentRoster::Agent agent;
    agent.address = net::HostPort{seen_from, std::to_string(told["port"].get<std::uint64_t>())}.str();
    if (told.contains("node")) {
        if (!told["node"].is_string() || told["node"].get<std::string>().size() > 63)
            throw oci::Error(ErrorCode::bad_request, "an agent's node is a name of at most 63 characters");
        for (char c : told["node"].get<std::string>())
            if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_')
                throw oci::Error(ErrorCode::bad_request, "an agent's node is a name");
        agent.node = told["node"].get<std::string>();
    }
    return agent;
}

ErrorCode code_of(int status) {
    if (status == 403) return ErrorCode::denied;
    if (status == 503) return ErrorCode::unavailable;
    return ErrorCode::unauthorized;
}

}  // namespace

std::optional<Response> delegated_refusal(auth::DelegatedAccess& door, const Request& request) {
    // Writes meet the agent's pull-only registry, which refuses them.
    if (request.method != Method::get && request.method != Method::head) return std::nullopt;
    const auto& route = *request.target.route;
    // The agent's catalog would name what others pulled through it.
    if (!route.names_repository() && route.read != Needs::none)
        return error_response(ErrorCode::unsupported, "the node agent lists nothing: ask the registry");
    const auto origin = std::string(request.secure ? "https://" : "http://") +
                        (net::plain_host(request.host) ? request.host : "localhost");
    // The name was checked against its grammar before this (require_valid_parts).
    auto verdict = door.check(request.authorization, request.target.name, origin);
    if (verdict.allowed()) return std::nullopt;
    auto response = error_response(code_of(verdict.status), verdict.message);
    if (!verdict.challenge.empty()) response.set("WWW-Authenticate", verdict.challenge);
    return response;
}

// The node agent's question (auth/delegated.hpp): reaching here, the caller may pull.
Plan plan_access(Context&, Request& request) {
    if (request.method != Method::get && request.method != Method::head) not_allowed();
    auto response = status_only(204);
    response.set(std::string(auth::access_header), "pull");
    return immediate(std::move(response));
}

// Node agents telling where fellow agents reach them, and reading back who else there is
// (http/agent_roster.hpp). The route's row admits only callers with a client certificate.
Plan plan_agents(Context& context, Request& request) {
    auto* roster = context.services.operations.agents;
    if (!roster) throw oci::Error(ErrorCode::unsupported, "only the replicas list node agents");
    if (request.method == Method::get || request.method == Method::head)
        return immediate(json_response(200, agents_json(*roster, "")));
    if (request.method != Method::post) not_allowed();
    Plan plan;
    plan.body = Plan::Body::buffer;
    plan.buffer_limit = 4 << 10;
    plan.blocking = false;
    plan.finish = [roster, seen_from = request.peer_address](std::string& body, std::uint64_t) {
        auto agent = agent_told(body, seen_from);
        auto you = agent.address;
        if (!roster->heard(std::move(agent)))
            throw oci::Error(ErrorCode::too_many_requests, "the replica lists as many agents as it keeps");
        return json_response(200, agents_json(*roster, you));
    };
    return plan;
}

}  // namespace berth::http
