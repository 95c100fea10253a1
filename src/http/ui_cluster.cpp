// The web UI's cluster page: every replica as it says it is (the peer API's status, asked now with
// a short deadline), this one's change log and backups, and what is wrong, in plain words.
#include <future>
#include <nlohmann/json.hpp>

#include "berth/net/client.hpp"
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

std::string grouped(std::uint64_t n) {
    auto digits = std::to_string(n);
    for (auto i = static_cast<std::ptrdiff_t>(digits.size()) - 3; i > 0; i -= 3)
        digits.insert(static_cast<std::size_t>(i), ",");
    return digits;
}

json replica_json(const std::string& id, const std::string& address) {
    return {{"id", id},
            {"address", address.empty() ? json(nullptr) : json(address)},
            {"self", false},
            {"reachable", false},
            {"ready", false},
            {"head", nullptr},
            {"behind", nullptr},
            {"lag_seconds", nullptr},
            {"bootstrap", nullptr},
            {"protocol", nullptr},
            {"change_log", nullptr},
            {"last_backup", nullptr},
            {"error", nullptr}};
}

// A replica's last backup as its status tells it: no replica asks another with a backup secret.
json last_backup(const std::optional<protocol::LastBackup>& backup) {
    if (!backup || backup->id.empty()) return nullptr;
    return {{"id", backup->id},
            {"finished", backup->finished ? json(backup->finished) : json(nullptr)},
            {"ok", backup->error.empty()},
            {"error", backup->error.empty() ? json(nullptr) : json(backup->error)}};
}

// What a replica's status says of it: how far behind its peers it is, and whether it is bootstrapping.
void read_status(json& replica, const protocol::Status& status) {
    replica["id"] = status.replica;
    replica["ready"] = status.ready;
    replica["head"] = status.log_head;
    std::uint64_t behind = 0;
    double lag = 0;
    for (auto& peer : status.peers) {
        behind += peer.head > peer.cursor ? peer.head - peer.cursor : 0;
        lag = std::max(lag, peer.lag_seconds);
        if (!peer.bootstrap_part.empty())
            replica["bootstrap"] = {{"part", peer.bootstrap_part}, {"copied", peer.bootstrap_records}};
        if (!peer.incompatible.empty())
            replica["error"] = "a peer speaks an incompatible protocol: " + peer.incompatible;
    }
    replica["behind"] = behind;
    replica["lag_seconds"] = lag;
    replica["last_backup"] = last_backup(status.last_backup);
}

json ask_peer(const Services& services, const std::string& address, const std::string& id) {
    auto replica = replica_json(id.empty() ? address : id, address);
    const auto origin = services.cluster->peer_origin(address);
    net::Headers headers = {{protocol::header::secret, services.cluster->secret()},
                            {protocol::header::replica, services.cluster->self_id()},
                            {protocol::header::versions, protocol::versions_text()}};
    try {
        auto answer = services.client->request(
            origin, {"GET", protocol::status_target(), headers, std::nullopt, false, peer_deadline}, {},
            max_answer_bytes);
        if (answer.status != 200) throw std::runtime_error("its status answered " + std::to_string(answer.status));
        auto status = protocol::parse_status(answer.body);
        if (!status) throw std::runtime_error("its status is not one");
        replica["reachable"] = true;
        replica["protocol"] = answer.header(protocol::header::versions);
        read_status(replica, *status);
    } catch (const std::exception& error) {
        replica["error"] = error.what();
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
        return name + " is copying the index from a peer (" + replica["bootstrap"]["part"].get<std::string>() + ", " +
               grouped(replica["bootstrap"]["copied"].get<std::uint64_t>()) + " records so far) and is not ready";
    return name + " is " + grouped(replica["behind"].get<std::uint64_t>()) + " changes behind and not ready";
}

}  // namespace

std::string cluster_json(Services& services) {
    const auto log = services.registry.change_log();
    auto self = replica_json(services.cluster ? services.cluster->self_id() : "this replica", "");
    self["self"] = self["reachable"] = self["ready"] = true;
    self["behind"] = 0;
    self["lag_seconds"] = 0;
    self["protocol"] = protocol::versions_text();
    self["change_log"] = {{"length", log.entries}, {"bytes", log.bytes}, {"oldest", log.oldest_ms}};
    if (services.backups) {
        const auto backup = services.backups->status();
        self["last_backup"] = last_backup(protocol::LastBackup{backup.id, backup.finished, backup.error});
    }
    std::vector<protocol::PeerState> peers;
    if (services.peers) {
        const auto status = services.peers->status();
        read_status(self, status);
        peers = status.peers;
    }
    auto replicas = json::array({self});
    // Asked at once, so a page with dead replicas still answers within one deadline.
    std::vector<std::future<json>> asked;
    if (services.cluster)
        for (auto& peer : peers)
            asked.push_back(std::async(std::launch::async, ask_peer, std::cref(services), peer.address, peer.id));
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
