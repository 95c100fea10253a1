// The web UI's cluster page: every replica as it says it is (the peer API's status, asked now with
// a short deadline), this one's change log and backups, and what is wrong, in plain words.
#include <future>
#include <nlohmann/json.hpp>

#include "berth/net/client.hpp"
#include "berth/oci/json.hpp"
#include "berth/registry/registry.hpp"
#include "berth/replication/cluster.hpp"
#include "berth/replication/peer_service.hpp"
#include "berth/replication/protocol.hpp"
#include "berth/storage/backup.hpp"
#include "handlers.hpp"

namespace berth::http {
namespace {

using nlohmann::json;
namespace protocol = replication::protocol;

// A peer that does not answer within this is reported unreachable, and so not ready.
constexpr std::chrono::milliseconds peer_deadline{1500};
constexpr std::size_t max_answer_bytes = 1 << 20;

json member(const json& object, const char* key) {
    if (!object.is_object()) return nullptr;
    auto it = object.find(key);
    return it == object.end() ? json(nullptr) : *it;
}

std::string text_of(const json& value) { return value.is_string() ? value.get<std::string>() : value.dump(); }

std::uint64_t number(const json& value) { return value.is_number_unsigned() ? value.get<std::uint64_t>() : 0; }

std::string grouped(std::uint64_t n) {
    auto digits = std::to_string(n);
    for (auto i = static_cast<std::ptrdiff_t>(digits.size()) - 3; i > 0; i -= 3)
        digits.insert(static_cast<std::size_t>(i), ",");
    return digits;
}

// What a replica's status says of it: how far behind its peers it is, and whether it is bootstrapping.
void read_status(json& replica, const json& status) {
    replica["ready"] = member(status, "ready") == true;
    replica["log_head"] = number(member(status, "log_head"));
    std::uint64_t behind = 0;
    double lag = 0;
    json bootstrap = nullptr;
    std::string incompatible;
    for (auto& peer : member(status, "peers").is_array() ? member(status, "peers") : json::array()) {
        behind += number(member(peer, "lag_events"));
        if (auto seconds = member(peer, "lag_seconds"); seconds.is_number()) lag = std::max(lag, seconds.get<double>());
        if (auto b = member(peer, "bootstrap"); b.is_object())
            bootstrap = {{"part", member(b, "part")}, {"records", member(b, "records")}};
        if (auto text = member(peer, "incompatible"); text.is_string() && !text.get<std::string>().empty())
            incompatible = text.get<std::string>();
    }
    replica["behind"] = behind;
    replica["lag_seconds"] = lag;
    replica["bootstrap"] = bootstrap;
    if (!incompatible.empty()) replica["error"] = "a peer speaks an incompatible protocol: " + incompatible;
}

json last_backup(const json& status) {
    if (!status.is_object() || member(status, "id").is_null()) return nullptr;
    return {{"id", member(status, "id")},
            {"finished", member(status, "finished")},
            {"ok", member(status, "error").is_null()},
            {"error", member(status, "error")}};
}

json ask_peer(Services& services, const std::string& address, const std::string& id) {
    json replica = {{"id", id.empty() ? address : id},
                    {"address", address},
                    {"self", false},
                    {"reachable", false},
                    {"ready", false},
                    {"log_head", nullptr},
                    {"behind", nullptr},
                    {"lag_seconds", nullptr},
                    {"bootstrap", nullptr},
                    {"protocol", nullptr},
                    {"change_log", nullptr},
                    {"last_backup", nullptr},
                    {"error", nullptr}};
    const auto origin = services.cluster->peer_origin(address);
    net::Headers headers = {{protocol::header::secret, services.cluster->secret()},
                            {protocol::header::replica, services.cluster->self_id()},
                            {protocol::header::versions, protocol::versions_text()}};
    try {
        auto answer = services.client->request(
            origin, {"GET", protocol::status_target(), headers, std::nullopt, false, peer_deadline}, {},
            max_answer_bytes);
        if (answer.status != 200) throw std::runtime_error("its status answered " + std::to_string(answer.status));
        auto status = oci::parse_json(answer.body);
        if (!status.is_object()) throw std::runtime_error("its status is not JSON");
        replica["reachable"] = true;
        if (auto named = member(status, "replica"); named.is_string()) replica["id"] = named;
        replica["protocol"] = answer.header(protocol::header::versions);
        read_status(replica, status);
    } catch (const std::exception& error) {
        replica["error"] = error.what();
        return replica;
    }
    if (services.backups && !services.backups->options().secret.empty()) try {
            auto answer = services.client->request(origin,
                                                   {"GET",
                                                    std::string(backup_path),
                                                    {{"Authorization", "Bearer " + services.backups->options().secret}},
                                                    std::nullopt,
                                                    false,
                                                    peer_deadline},
                                                   {}, max_answer_bytes);
            if (answer.status == 200) replica["last_backup"] = last_backup(oci::parse_json(answer.body));
        } catch (const std::exception&) {
            // Its status answered: the backup is only left out.
        }
    return replica;
}

std::string problem_of(const json& replica) {
    const auto name = replica["id"].get<std::string>();
    if (!replica["reachable"].get<bool>())
        return name + " does not answer (" + replica["error"].get<std::string>() + ") and is not ready";
    if (replica["error"].is_string()) return name + ": " + replica["error"].get<std::string>();
    if (replica["ready"].get<bool>()) return {};
    if (replica["bootstrap"].is_object())
        return name + " is copying the index from a peer (" + text_of(replica["bootstrap"]["part"]) + ", " +
               grouped(number(replica["bootstrap"]["records"])) + " records so far) and is not ready";
    return name + " is " + grouped(number(replica["behind"])) + " changes behind and not ready";
}

}  // namespace

std::string cluster_json(Services& services) {
    const auto log = services.registry.change_log();
    json self = {{"id", services.cluster ? services.cluster->self_id() : std::string("this replica")},
                 {"address", nullptr},
                 {"self", true},
                 {"reachable", true},
                 {"ready", true},
                 {"log_head", nullptr},
                 {"behind", 0},
                 {"lag_seconds", 0},
                 {"bootstrap", nullptr},
                 {"protocol", protocol::versions_text()},
                 {"change_log", {{"entries", log.entries}, {"bytes", log.bytes}, {"oldest", log.oldest_ms}}},
                 {"last_backup",
                  services.backups ? last_backup(oci::parse_json(services.backups->status_json())) : json(nullptr)},
                 {"error", nullptr}};
    auto replicas = json::array();
    json peers = json::array();
    if (services.peers) {
        auto status = oci::parse_json(services.peers->status_json());
        read_status(self, status);
        peers = member(status, "peers");
    }
    replicas.push_back(self);
    // Asked at once, so a page with dead replicas still answers within one deadline.
    std::vector<std::future<json>> asked;
    if (services.cluster && peers.is_array())
        for (auto& peer : peers)
            asked.push_back(std::async(std::launch::async, ask_peer, std::ref(services),
                                       text_of(member(peer, "address")),
                                       member(peer, "id").is_string() ? member(peer, "id").get<std::string>() : ""));
    for (auto& answer : asked) replicas.push_back(answer.get());
    auto problems = json::array();
    for (auto& replica : replicas) {
        if (auto problem = problem_of(replica); !problem.empty()) problems.push_back(problem);
        if (auto backup = replica["last_backup"]; backup.is_object() && backup["ok"] == false)
            problems.push_back("the last backup of " + replica["id"].get<std::string>() +
                               " failed: " + backup["error"].dump());
    }
    return json{{"self", self["id"]}, {"replicas", replicas}, {"problems", problems}}.dump(
        -1, ' ', false, json::error_handler_t::replace);
}

}  // namespace berth::http
