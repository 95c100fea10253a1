// The web UI's cluster page: every replica as it says it is (the peer API's status, as replication
// last heard it), this one's change log and backups, and what is wrong, in plain words.
#include <nlohmann/json.hpp>

#include "berth/replication/peer_service.hpp"
#include "berth/replication/protocol.hpp"
#include "berth/storage/backup.hpp"
#include "berth/storage/meta_store.hpp"
#include "berth/ui/views.hpp"

namespace berth::ui {
namespace {

using nlohmann::json;
namespace protocol = replication::protocol;

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

// What this replica last heard from a peer (replication asks every peer's status every two
// seconds): no request waits on a peer here.
json peer_json(const replication::PeerView& peer) {
    auto replica = replica_json(peer.id.empty() ? peer.address : peer.id, peer.address);
    if (!peer.status) {
        replica["error"] = peer.error;
        return replica;
    }
    replica["reachable"] = true;
    replica["protocol"] = peer.versions;
    read_status(replica, *peer.status);
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

std::string cluster_json(const std::string& self_id, const storage::LogStats& log,
                         const replication::PeerService* peers, const storage::BackupJob* backups) {
    auto self = replica_json(peers ? peers->self_id() : self_id, "");
    self["self"] = self["reachable"] = self["ready"] = true;
    self["behind"] = 0;
    self["lag_seconds"] = 0;
    self["protocol"] = protocol::versions_text();
    self["change_log"] = {{"length", log.entries}, {"bytes", log.bytes}, {"oldest", log.oldest_ms}};
    if (backups) {
        const auto backup = backups->status();
        self["last_backup"] = last_backup(protocol::LastBackup{backup.id, backup.finished, backup.error});
    }
    auto replicas = json::array();
    if (peers) {
        const auto view = peers->cluster_view();
        read_status(self, view.self);
        replicas.push_back(self);
        for (auto& peer : view.peers) replicas.push_back(peer_json(peer));
    } else {
        replicas.push_back(self);
    }
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

}  // namespace berth::ui
