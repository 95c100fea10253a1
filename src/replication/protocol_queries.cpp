// The peer API's queries, parsed back by the replica answering them, and the record answer.
#include <charconv>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "berth/oci/json.hpp"
#include "berth/oci/names.hpp"
#include "berth/replication/protocol.hpp"

namespace berth::replication::protocol {
namespace {

std::uint64_t number(const Query& query, std::string_view name, std::uint64_t fallback) {
    auto text = query(name);
    std::uint64_t value = fallback;
    if (text) std::from_chars(text->data(), text->data() + text->size(), value);
    return value;
}

std::string text(const Query& query, std::string_view name) { return query(name).value_or(""); }

}  // namespace

LogRequest parse_log_query(const Query& query) { return {number(query, "after", 0), number(query, "limit", 500)}; }

StateRequest parse_state_query(const Query& query) {
    StateRequest state;
    auto part = parse_part(text(query, "part"));
    if (!part) throw std::invalid_argument("state needs part=links|images|indexes|tags");
    state.part = *part;
    try {
        state.after = unhex(text(query, "after"));
    } catch (const std::invalid_argument&) {
        throw std::invalid_argument("state: after must be hex");
    }
    state.limit = number(query, "limit", 1000);
    state.session = text(query, "session");
    state.since = number(query, "since", 0);
    state.summary = text(query, "summary") == "1";
    return state;
}

std::string manifest_repository(const Query& query) { return text(query, "repo"); }

std::optional<RecordRequest> parse_record_query(const Query& query) {
    for (auto kind : {RecordKind::link, RecordKind::manifest, RecordKind::tag})
        if (auto key = query(record_kind_name(kind))) return RecordRequest{text(query, "repo"), kind, *key};
    return std::nullopt;
}

std::string encode_record(const RecordAnswer& answer) {
    auto out = stamp_json(answer.stamp);
    if (!answer.digest.empty()) out["digest"] = answer.digest;
    return out.dump();
}

RecordAnswer parse_record(std::string_view body, RecordKind kind) {
    auto doc = oci::parse_json_or_throw(body, "a peer's record");
    try {
        RecordAnswer answer{stamp_of(doc), {}};
        if (kind == RecordKind::tag) answer.digest = doc.at("digest").get<std::string>();
        return answer;
    } catch (const nlohmann::json::exception& error) {
        throw std::invalid_argument(std::string("a peer's record: ") + error.what());
    }
}

std::string encode_claim(const ClaimRequest& request) {
    return nlohmann::json{
        {"repo", request.repo}, {"tag", request.tag}, {"digest", request.digest}, {"expires_ms", request.expires_ms}}
        .dump();
}

std::optional<ClaimRequest> parse_claim(std::string_view body) {
    auto doc = oci::parse_json(body);
    if (!doc.is_object()) return std::nullopt;
    auto field = [&](const char* key) {
        auto it = doc.find(key);
        return it != doc.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    ClaimRequest request{field("repo"), field("tag"), field("digest"), 0};
    if (auto it = doc.find("expires_ms"); it != doc.end() && it->is_number_unsigned())
        request.expires_ms = it->get<std::uint64_t>();
    if (!oci::valid_repository_name(request.repo) || !oci::valid_tag(request.tag) ||
        !oci::Digest::parse(request.digest))
        return std::nullopt;
    return request;
}

std::string encode_claim_answer(const ClaimAnswer& answer) {
    return nlohmann::json{{"granted", answer.granted}, {"digest", answer.digest}}.dump();
}

ClaimAnswer parse_claim_answer(std::string_view body) {
    auto doc = oci::parse_json_or_throw(body, "a peer's claim answer");
    try {
        return {doc.at("granted").get<bool>(), doc.at("digest").get<std::string>()};
    } catch (const nlohmann::json::exception& error) {
        throw std::invalid_argument(std::string("a peer's claim answer: ") + error.what());
    }
}

PullsRequest parse_pulls_query(const Query& query) {
    return {text(query, "repo"), number(query, "since", 0), text(query, "after")};
}

}  // namespace berth::replication::protocol
