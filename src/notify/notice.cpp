// Events as receivers see them (notice.hpp): one change-log event becomes one notice, whose id and
// sequence every replica computes alike, rendered as CloudEvents or as Distribution's envelope.
#include "notice.hpp"

#include <openssl/sha.h>

#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "berth/oci/encoding.hpp"
#include "berth/oci/json.hpp"
#include "berth/oci/manifest.hpp"
#include "berth/storage/hybrid_clock.hpp"
#include "berth/storage/meta_store.hpp"

namespace berth::notify {
namespace {

using nlohmann::json;
using Type = storage::Event::Type;

// Within one stamp (a push stores its manifest and sets its tags in one write), the order a
// receiver expects: the manifest before the tags that name it, deletes of tags before the manifest's.
int rank_of(Type type) {
    switch (type) {
        case Type::manifest: return 1;
        case Type::tag: return 2;
        case Type::tag_deleted: return 3;
        case Type::manifest_deleted: return 4;
        default: return 0;
    }
}

std::string rfc3339(std::uint64_t ms) {
    const std::time_t seconds = static_cast<std::time_t>(ms / 1000);
    std::tm utc{};
    gmtime_r(&seconds, &utc);
    char text[64];
    std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03uZ", utc.tm_year + 1900, utc.tm_mon + 1,
                  utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, static_cast<unsigned>(ms % 1000));
    return text;
}

json data_of(const Notice& n) {
    json data = {{"action", action_name(n.action)}, {"repository", n.repository}, {"replica", n.replica}};
    if (!n.tag.empty()) data["tag"] = n.tag;
    if (!n.digest.empty()) data["digest"] = n.digest;
    if (!n.media_type.empty()) data["mediaType"] = n.media_type;
    if (n.size) data["size"] = n.size;
    if (!n.artifact_type.empty()) data["artifactType"] = n.artifact_type;
    if (!n.subject.empty()) data["subject"] = n.subject;
    if (!n.upstream.empty()) data["upstream"] = n.upstream;
    if (!n.principal.empty()) data["principal"] = n.principal;
    if (n.action == Action::pull) {
        data["count"] = n.pulls;
        data["firstPull"] = rfc3339(n.first_pull_ms);
    }
    if (n.action == Action::rebuild) {
        auto images = json::array();
        for (auto& image : n.images) {
            json one = {{"repository", image.repository}, {"digest", image.digest}};
            if (!image.tag.empty()) one["tag"] = image.tag;
            images.push_back(std::move(one));
        }
        data["previous"] = n.previous;
        data["images"] = std::move(images);
        data["page"] = n.page;
        data["lastPage"] = n.last_page;
    }
    return data;
}

json cloudevent(const Notice& n) {
    return {{"specversion", "1.0"},
            {"id", n.id},
            {"source", "/berth"},
            {"type", std::string("io.berth.") + action_name(n.action)},
            {"subject", n.repository + (n.tag.empty() ? "@" + n.digest : ":" + n.tag)},
            {"time", rfc3339(n.time_ms)},
            {"sequence", n.sequence},
            {"datacontenttype", "application/json"},
            {"data", data_of(n)}};
}

}  // namespace

const char* action_name(Action action) {
    switch (action) {
        case Action::push: return "push";
        case Action::tag: return "tag";
        case Action::del: return "delete";
        case Action::mirror: return "mirror";
        case Action::retention: return "retention";
        case Action::rebuild: return "rebuild";
        case Action::pull: return "pull";
    }
    return "push";
}

bool noticed(const storage::Event& event) { return rank_of(event.type) != 0; }

std::string sequence_text(const storage::Stamp& stamp, int rank, const std::string& key) {
    char clock[24];
    std::snprintf(clock, sizeof clock, "%020llu", static_cast<unsigned long long>(stamp.clock));
    return std::string(clock) + "-" + stamp.replica + "-" + std::to_string(rank) + "-" + key;
}

std::string sequence_of(const storage::Event& event) {
    const auto& key = event.type == Type::tag || event.type == Type::tag_deleted ? event.tag : event.digest;
    return sequence_text(event.stamp, rank_of(event.type), key);
}

std::string id_of(const std::string& identity) {
    unsigned char hash[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char*>(identity.data()), identity.size(), hash);
    return oci::hex({reinterpret_cast<const char*>(hash), 16});
}

std::optional<Notice> notice_of(const storage::Event& event, const std::string& mirror_host) {
    const int rank = rank_of(event.type);
    if (!rank) return std::nullopt;
    Notice n;
    n.repository = event.repo;
    n.digest = event.digest;
    n.tag = event.tag;
    n.stamp = event.stamp;
    n.replica = event.stamp.replica;
    if (event.principal.size() <= max_field) n.principal = event.principal;
    n.time_ms = storage::HybridClock::physical_ms(event.stamp.clock);
    n.upstream = mirror_host;
    switch (event.type) {
        case Type::manifest: n.action = mirror_host.empty() ? Action::push : Action::mirror; break;
        case Type::tag: n.action = Action::tag; break;
        default: n.action = event.cause == "retention" ? Action::retention : Action::del; break;
    }
    const auto& key = event.type == Type::tag || event.type == Type::tag_deleted ? event.tag : event.digest;
    const auto identity = std::to_string(event.stamp.clock) + '\n' + event.stamp.replica + '\n' + std::to_string(rank) +
                          '\n' + event.repo + '\n' + key;
    n.id = id_of(identity);
    n.sequence = sequence_of(event);
    return n;
}

void Describer::describe(Notice& n) {
    if (n.digest.empty()) return;
    const auto key = n.repository + '@' + n.digest;
    auto it = remembered_.find(key);
    if (it == remembered_.end()) {
        auto record = meta_.manifest(n.repository, n.digest, storage::MetaStore::CacheUse::bypass);
        if (!record || record->deleted) return;  // a deleted one's bytes are gone
        if (remembered_.size() >= max_remembered) remembered_.clear();
        Description d;
        {
            auto bounded = [](std::string text) { return text.size() <= max_field ? text : std::string(); };
            d.media_type = bounded(record->media_type);
            d.size = record->bytes.size();
            d.subject = bounded(record->subject);
            try {
                d.artifact_type = bounded(oci::parse_manifest(record->bytes, record->media_type).artifact_type);
            } catch (const std::exception&) {
                // Stored, so it was accepted once; its artifact type is only a nicety.
            }
        }
        it = remembered_.emplace(key, std::move(d)).first;
    }
    const auto& d = it->second;
    n.media_type = d.media_type;
    n.size = d.size;
    n.subject = d.subject;
    n.artifact_type = d.artifact_type;
}

std::string cloudevent_json(const Notice& notice) { return cloudevent(notice).dump(); }

std::string cloudevents_batch_json(const std::vector<Notice>& notices) {
    json out = json::array();
    for (auto& n : notices) out.push_back(cloudevent(n));
    return out.dump();
}

std::string distribution_json(const std::vector<Notice>& notices) {
    json events = json::array();
    for (auto& n : notices) {
        // Distribution's receivers know push, pull and delete: a tag set or a mirrored manifest is
        // a push to them, a retention's delete a delete (pull counts are not sent in this format).
        const bool deleted = n.action == Action::del || n.action == Action::retention;
        json target = {{"repository", n.repository}};
        if (!n.digest.empty()) target["digest"] = n.digest;
        if (!n.tag.empty()) target["tag"] = n.tag;
        if (!n.media_type.empty()) target["mediaType"] = n.media_type;
        if (n.size) target["size"] = target["length"] = n.size;
        if (n.action == Action::rebuild) target["rebuild"] = data_of(n)["images"];
        json event = {{"id", n.id},
                      {"timestamp", rfc3339(n.time_ms)},
                      {"action", n.action == Action::rebuild ? "rebuild"
                                 : deleted                   ? "delete"
                                                             : "push"},
                      {"target", target},
                      {"source", {{"instanceID", n.replica}}}};
        if (!n.principal.empty()) event["actor"] = {{"name", n.principal}};
        events.push_back(std::move(event));
    }
    return json{{"events", events}}.dump();
}

}  // namespace berth::notify
