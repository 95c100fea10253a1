#include "berth/oci/json.hpp"
#include "berth/storage/events.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace berth::storage {
namespace {

constexpr const char* type_names[] = {"link", "unlink", "manifest", "manifest_deleted", "tag", "tag_deleted"};

}  // namespace

std::string Event::json() const {
    nlohmann::json out = {{"type", type_names[static_cast<int>(type)]},
                          {"repo", repo},
                          {"clock", stamp.clock},
                          {"origin", stamp.replica}};
    if (!digest.empty()) out["digest"] = digest;
    if (!tag.empty()) out["tag"] = tag;
    if (!cause.empty()) out["cause"] = cause;
    if (!principal.empty()) out["by"] = principal;
    return out.dump();
}

std::optional<Event> Event::parse(const std::string& text) {
    auto j = oci::parse_json(text);
    if (!j.is_object()) return std::nullopt;
    try {
        Event event{};
        auto type = j.at("type").get<std::string>();
        bool known = false;
        for (int i = 0; i < 6; ++i)
            if (type == type_names[i]) {
                event.type = static_cast<Type>(i);
                known = true;
            }
        if (!known) return std::nullopt;
        event.repo = j.at("repo").get<std::string>();
        event.stamp = {j.at("clock").get<std::uint64_t>(), j.at("origin").get<std::string>()};
        event.digest = j.value("digest", "");
        event.tag = j.value("tag", "");
        // A peer's word, relayed to receivers and to other peers: printable, bounded, else dropped.
        auto printable = [](const std::string& text, std::size_t limit) {
            const bool ok = text.size() <= limit &&
                            std::all_of(text.begin(), text.end(), [](char c) { return c >= ' ' && c <= '~'; });
            return ok ? text : std::string();
        };
        event.cause = printable(j.value("cause", ""), 32);
        event.principal = printable(j.value("by", ""), 256);
        return event;
    } catch (const nlohmann::json::exception&) {
        return std::nullopt;
    }
}

}  // namespace berth::storage
