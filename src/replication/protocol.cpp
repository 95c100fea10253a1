#include "berth/oci/json.hpp"
#include "berth/replication/protocol.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <stdexcept>
#include <nlohmann/json.hpp>

#include "berth/net/host_port.hpp"
#include "berth/oci/digest.hpp"
#include "berth/oci/encoding.hpp"

namespace berth::replication::protocol {

namespace {

std::optional<int> number(std::string_view text) {
    int value = 0;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return value;
}

}  // namespace

std::string versions_text() { return std::to_string(oldest) + "-" + std::to_string(version); }

std::optional<Versions> parse_versions(std::string_view text) {
    if (text.empty()) return Versions{1, 1};
    auto dash = text.find('-');
    if (dash == std::string_view::npos) return std::nullopt;
    auto low = number(text.substr(0, dash));
    auto high = number(text.substr(dash + 1));
    if (!low || !high || *low < 1 || *low > *high) return std::nullopt;
    return Versions{*low, *high};
}

bool compatible(const Versions& peer) { return std::max(peer.oldest, oldest) <= std::min(peer.newest, version); }

std::string incompatibility(const Versions& peer) {
    return "peer speaks protocol versions " + std::to_string(peer.oldest) + "-" + std::to_string(peer.newest) +
           ", this replica " + versions_text();
}

std::string log_target(std::uint64_t after, std::size_t limit) {
    return std::string(prefix) + "log?after=" + std::to_string(after) + "&limit=" + std::to_string(limit);
}
namespace {
constexpr std::array<const char*, 4> part_names = {"links", "images", "indexes", "tags"};
}  // namespace

std::optional<storage::StatePart> parse_part(std::string_view name) {
    for (std::size_t i = 0; i < part_names.size(); ++i)
        if (name == part_names[i]) return static_cast<storage::StatePart>(i);
    return std::nullopt;
}

const char* part_name(storage::StatePart part) { return part_names[static_cast<std::size_t>(part)]; }

std::string state_target(const StateRequest& r) {
    return std::string(prefix) + "state?part=" + part_name(r.part) + "&after=" + oci::hex(r.after) +
           "&limit=" + std::to_string(r.limit) + "&session=" + r.session + "&since=" + std::to_string(r.since) +
           (r.summary ? "&summary=1" : "");
}

std::string unhex(std::string_view text) {
    auto bytes = oci::unhex(text);
    if (!bytes) throw std::invalid_argument("not an even run of lower-case hex digits");
    return std::move(*bytes);
}

std::string encode_state(const StatePageAnswer& a) {
    nlohmann::json records = nlohmann::json::array();
    for (auto& r : a.page.records) {
        auto item = stamp_json(r.stamp);
        item.update({{"repo", r.repo}, {"key", r.key}, {"deleted", r.deleted}});
        if (!r.digest.empty()) item["digest"] = r.digest;
        if (!r.media_type.empty()) item["media_type"] = r.media_type;
        if (!r.bytes.empty()) item["bytes"] = r.bytes;
        records.push_back(std::move(item));
    }
    return nlohmann::json{
        {"replica", a.replica},          {"epoch", a.epoch},    {"session", a.session}, {"head", a.head},
        {"last", oci::hex(a.page.last)}, {"done", a.page.done}, {"hash", a.page.hash},  {"count", a.page.count},
        {"records", std::move(records)}}
        .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

StatePageAnswer parse_state(std::string_view body) {
    auto doc = oci::parse_json_or_throw(body, "a state page");
    StatePageAnswer a{doc.at("replica").get<std::string>(),
                      doc.at("epoch").get<std::string>(),
                      doc.at("session").get<std::string>(),
                      doc.at("head").get<std::uint64_t>(),
                      {}};
    a.page.last = unhex(doc.at("last").get<std::string>());
    a.page.done = doc.at("done").get<bool>();
    a.page.hash = doc.at("hash").get<std::string>();
    a.page.count = doc.at("count").get<std::size_t>();
    for (auto& item : doc.at("records")) {
        storage::StateRecord r{item.at("repo").get<std::string>(),
                               item.at("key").get<std::string>(),
                               stamp_of(item),
                               item.at("deleted").get<bool>(),
                               item.value("digest", ""),
                               item.value("media_type", ""),
                               item.value("bytes", "")};
        a.page.records.push_back(std::move(r));
    }
    return a;
}
std::string blob_target(const std::string& digest) { return std::string(prefix) + "blobs/" + digest; }
std::string manifest_target(const std::string& repo, const std::string& digest) {
    // Names, digests and tags need no escaping in a query: [a-z0-9._/-], [a-z0-9:+.=_-], [A-Za-z0-9._-].
    return std::string(prefix) + "manifests/" + digest + "?repo=" + repo;
}
const char* record_kind_name(RecordKind kind) {
    switch (kind) {
        case RecordKind::link: return "link";
        case RecordKind::manifest: return "manifest";
        case RecordKind::tag: return "tag";
    }
    return "";
}
std::string record_target(const std::string& repo, RecordKind kind, const std::string& key) {
    return std::string(prefix) + "record?repo=" + repo + "&" + record_kind_name(kind) + "=" + key;
}
std::string apply_target() { return std::string(prefix) + "apply"; }
std::string claim_target() { return std::string(prefix) + "claim"; }
std::string pulls_target(const std::string& repo, std::uint64_t since_ms, const std::string& after) {
    auto target = std::string(prefix) + "pulls?repo=" + repo + "&since=" + std::to_string(since_ms);
    if (!after.empty()) target += "&after=" + net::query_escape(after);  // a digest may hold '+'
    return target;
}

Operation operation_of(std::string_view path) {
    if (path == "log") return Operation::log;
    if (path == "state") return Operation::state;
    if (path == "status") return Operation::status;
    if (path == "record") return Operation::record;
    if (path == "apply") return Operation::apply;
    if (path == "pulls") return Operation::pulls;
    if (path == "claim") return Operation::claim;
    if (path.starts_with("blobs/")) return Operation::blob;
    if (path.starts_with("manifests/")) return Operation::manifest;
    return Operation::unknown;
}

std::string_view content_digest(std::string_view path) { return path.substr(path.find('/') + 1); }

std::string encode_apply(const ApplyRequest& request) {
    nlohmann::json body = {{"events", nlohmann::json::array()}, {"manifests", nlohmann::json::array()}};
    for (auto& event : request.events) body["events"].push_back(nlohmann::json::parse(event.json()));
    for (auto& m : request.manifests)
        body["manifests"].push_back(
            {{"repo", m.repo}, {"digest", m.digest}, {"media_type", m.media_type}, {"bytes", m.bytes}});
    return body.dump();
}

std::optional<ApplyRequest> parse_apply(std::string_view body) {
    auto doc = oci::parse_json(body);
    if (!doc.is_object() || !doc.contains("events") || !doc["events"].is_array()) return std::nullopt;
    ApplyRequest out;
    for (auto& item : doc["events"]) {
        auto event = storage::Event::parse(item.dump());
        if (!event) return std::nullopt;
        out.events.push_back(std::move(*event));
    }
    if (!doc.contains("manifests")) return out;  // from a replica that sent none
    if (!doc["manifests"].is_array()) return std::nullopt;
    try {
        for (auto& m : doc["manifests"]) {
            PushedManifest manifest{m.at("repo").get<std::string>(), m.at("digest").get<std::string>(),
                                    m.at("media_type").get<std::string>(), m.at("bytes").get<std::string>()};
            auto digest = oci::Digest::parse(manifest.digest);
            if (digest && oci::Digest::of(digest->algorithm(), manifest.bytes) == *digest)
                out.manifests.push_back(std::move(manifest));
        }
    } catch (const nlohmann::json::exception&) {
        return std::nullopt;
    }
    return out;
}

std::string encode_log_page(const LogPage& page) {
    auto entries = nlohmann::json::array();
    for (auto& [sequence, event] : page.entries) entries.push_back({{"seq", sequence}, {"event", event}});
    return nlohmann::json{{"replica", page.replica}, {"epoch", page.epoch},     {"head", page.head},
                          {"first", page.first},     {"filling", page.filling}, {"entries", std::move(entries)}}
        .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

LogPage parse_log_page(std::string_view body) {
    auto doc = oci::parse_json_or_throw(body, "a log page");
    try {
        LogPage page{doc.at("replica").get<std::string>(), doc.at("epoch").get<std::string>(),
                     doc.at("head").get<std::uint64_t>(),  doc.value("first", std::uint64_t{0}),
                     doc.value("filling", false),          {}};
        // It keys this replica's cursor for that peer, and names the peer in status and ownership.
        if (!valid_replica_id(page.replica)) throw std::invalid_argument("a log page names no valid replica");
        for (auto& entry : doc.at("entries"))
            page.entries.emplace_back(entry.at("seq").get<std::uint64_t>(), entry.at("event").get<std::string>());
        return page;
    } catch (const nlohmann::json::exception& error) {
        throw std::invalid_argument(std::string("a log page: ") + error.what());
    }
}

std::string encode_pulls(const PullsPage& page) {
    return nlohmann::json{{"pulls", page.pulls}, {"more", page.more}}.dump();
}

std::optional<PullsPage> parse_pulls(std::string_view body) {
    auto doc = oci::parse_json(body);
    try {
        return PullsPage{doc.at("pulls").get<std::vector<std::pair<std::string, std::uint64_t>>>(),
                         doc.at("more").get<bool>()};
    } catch (const nlohmann::json::exception&) {
        return std::nullopt;
    }
}

namespace {
constexpr std::size_t replica_id_max = 63;
bool replica_id_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; }
}  // namespace

bool valid_replica_id(std::string_view id) {
    return !id.empty() && id.size() <= replica_id_max && std::all_of(id.begin(), id.end(), replica_id_char);
}

std::string replica_id_from(std::string_view name) {
    std::string id;
    for (char c : name) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
        if (replica_id_char(c)) id += c;
        if (id.size() == replica_id_max) break;
    }
    return id.empty() ? "berth" : id;
}

nlohmann::json stamp_json(const storage::Stamp& stamp) { return {{"clock", stamp.clock}, {"origin", stamp.replica}}; }

storage::Stamp stamp_of(const nlohmann::json& object) {
    return {object.at("clock").get<std::uint64_t>(), object.at("origin").get<std::string>()};
}

}  // namespace berth::replication::protocol
