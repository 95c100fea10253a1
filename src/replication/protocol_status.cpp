// The status answer, and what a replica keeps of its peers between runs.
#include <nlohmann/json.hpp>

#include "berth/oci/encoding.hpp"
#include "berth/oci/json.hpp"
#include "berth/replication/protocol.hpp"

namespace berth::replication::protocol {

std::string status_target() { return std::string(prefix) + "status"; }

std::string encode_status(const Status& status) {
    auto peers = nlohmann::json::array();
    for (auto& p : status.peers) {
        peers.push_back({{"address", p.address},
                         {"id", p.id},
                         {"reachable", p.reachable},
                         {"caught_up", p.caught_up},
                         {"cursor", p.cursor},
                         {"head", p.head},
                         {"lag_events", p.head > p.cursor ? p.head - p.cursor : 0},
                         {"lag_seconds", p.lag_seconds},
                         {"applied", p.applied},
                         {"errors", p.errors},
                         {"last_error", p.last_error},
                         {"incompatible", p.incompatible}});
        if (!p.bootstrap_part.empty())
            peers.back()["bootstrap"] = {{"part", p.bootstrap_part}, {"records", p.bootstrap_records}};
    }
    nlohmann::json doc{{"replica", status.replica},
                       {"epoch", status.epoch},
                       {"log_head", status.log_head},
                       {"ready", status.ready},
                       {"bytes_fetched", status.bytes_fetched},
                       {"peers", std::move(peers)}};
    if (const auto& b = status.last_backup)
        doc["last_backup"] = {{"id", b->id}, {"finished", b->finished}, {"error", b->error}};
    return doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::optional<Status> parse_status(std::string_view body) {
    auto doc = oci::parse_json(body);
    try {
        Status status{doc.at("replica").get<std::string>(),
                      doc.at("epoch").get<std::string>(),
                      doc.at("log_head").get<std::uint64_t>(),
                      doc.at("ready").get<bool>(),
                      doc.at("bytes_fetched").get<std::uint64_t>(),
                      {},
                      std::nullopt};
        for (auto& p : doc.at("peers")) {
            PeerState peer;
            peer.address = p.at("address").get<std::string>();
            peer.id = p.at("id").get<std::string>();
            peer.reachable = p.at("reachable").get<bool>();
            peer.caught_up = p.at("caught_up").get<bool>();
            peer.cursor = p.at("cursor").get<std::uint64_t>();
            peer.head = p.at("head").get<std::uint64_t>();
            peer.lag_seconds = p.at("lag_seconds").get<double>();
            peer.applied = p.at("applied").get<std::uint64_t>();
            peer.errors = p.at("errors").get<std::uint64_t>();
            peer.last_error = p.at("last_error").get<std::string>();
            peer.incompatible = p.at("incompatible").get<std::string>();
            if (auto b = p.find("bootstrap"); b != p.end()) {
                peer.bootstrap_part = b->at("part").get<std::string>();
                peer.bootstrap_records = b->at("records").get<std::uint64_t>();
            }
            status.peers.push_back(std::move(peer));
        }
        // An older replica tells no backup.
        if (auto b = doc.find("last_backup"); b != doc.end())
            status.last_backup = LastBackup{b->at("id").get<std::string>(), b->at("finished").get<std::uint64_t>(),
                                            b->at("error").get<std::string>()};
        return status;
    } catch (const nlohmann::json::exception&) {
        return std::nullopt;
    }
}

std::string encode_progress(const BootstrapProgress& p) {
    return nlohmann::json{{"epoch", p.epoch},
                          {"since", p.since},
                          {"part", part_name(p.part)},
                          {"after", oci::hex(p.after)},
                          {"incremental", p.incremental}}
        .dump();
}

std::optional<BootstrapProgress> parse_progress(std::string_view text) {
    if (text.empty()) return std::nullopt;
    try {
        auto doc = nlohmann::json::parse(text);
        auto part = parse_part(doc.at("part").get<std::string>());
        if (!part) return std::nullopt;
        return BootstrapProgress{doc.at("epoch").get<std::string>(), doc.at("since").get<std::uint64_t>(), *part,
                                 unhex(doc.at("after").get<std::string>()), doc.at("incremental").get<bool>()};
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

std::string encode_cursors(const std::map<std::string, std::uint64_t>& cursors) {
    return nlohmann::json(cursors).dump();
}

std::map<std::string, std::uint64_t> parse_cursors(std::string_view text) {
    std::map<std::string, std::uint64_t> out;
    auto doc = nlohmann::json::parse(text, nullptr, false);
    if (!doc.is_object()) return out;
    for (auto& [replica, sequence] : doc.items())
        if (sequence.is_number_unsigned()) out[replica] = sequence.get<std::uint64_t>();
    return out;
}

}  // namespace berth::replication::protocol
