// Progress records (progress.hpp): their merge and their encoding.
#include "progress.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "berth/oci/json.hpp"

namespace berth::notify {
namespace {

using nlohmann::json;

// A peer's answer is outside input: bounded, and what does not parse is ignored.
constexpr std::size_t max_origins = 1024;

json to_json(const Progress& p) {
    json origins = json::object();
    for (auto& [origin, clock] : p.origins) origins[origin] = clock;
    json out = {{"g", p.generation}, {"f", p.floor}, {"o", origins}, {"d", p.disabled}, {"e", p.enabled}};
    if (!p.disabled_reason.empty()) out["dr"] = p.disabled_reason;
    return out;
}

// A whole number of 64 bits, or a throw: a float such as 1e300 does not convert.
std::uint64_t clock_of(const json& j) {
    if (!j.is_number_unsigned()) throw std::invalid_argument("not a clock");
    return j.get<std::uint64_t>();
}

std::optional<Progress> from_json(const json& j) {
    if (!j.is_object()) return std::nullopt;
    try {
        Progress p;
        p.generation = clock_of(j.at("g"));
        p.floor = clock_of(j.at("f"));
        p.disabled = j.contains("d") ? clock_of(j["d"]) : 0;
        p.enabled = j.contains("e") ? clock_of(j["e"]) : 0;
        // Told by a peer: printable ASCII, bounded (it goes into JSON answers and logs as it is).
        for (char c : j.value("dr", std::string()))
            if (c >= ' ' && c <= '~' && p.disabled_reason.size() < 512) p.disabled_reason += c;
        const auto& origins = j.at("o");
        if (!origins.is_object() || origins.size() > max_origins) return std::nullopt;
        for (auto& [origin, clock] : origins.items()) p.origins[origin] = clock_of(clock);
        return p;
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

}  // namespace

bool Progress::covers(const storage::Stamp& stamp) const {
    if (stamp.clock <= floor) return true;
    auto it = origins.find(stamp.replica);
    return it != origins.end() && stamp.clock <= it->second;
}

void Progress::pass(const storage::Stamp& stamp) {
    auto& clock = origins[stamp.replica];
    clock = std::max(clock, stamp.clock);
}

void Progress::merge(const Progress& other) {
    if (other.origins.size() > max_origins) return;
    if (other.generation > generation) {
        generation = other.generation;
        floor = other.floor;
        origins = other.origins;
    } else if (other.generation == generation) {
        floor = std::max(floor, other.floor);
        for (auto& [origin, clock] : other.origins)
            if (origins.count(origin) || origins.size() < max_origins) pass({clock, origin});
    }
    if (other.disabled > disabled) {
        disabled = other.disabled;
        disabled_reason = other.disabled_reason;
    }
    enabled = std::max(enabled, other.enabled);
}

std::string encode_progress(const Progress& progress) { return to_json(progress).dump(); }

std::optional<Progress> parse_progress(const std::string& text) { return from_json(oci::parse_json(text)); }

std::string encode_progress_map(const std::map<std::string, Progress>& all) {
    json out = json::object();
    for (auto& [name, p] : all) out[name] = to_json(p);
    return out.dump();
}

std::map<std::string, Progress> parse_progress_map(const std::string& text) {
    std::map<std::string, Progress> out;
    auto j = oci::parse_json(text);
    if (!j.is_object()) return out;
    for (auto& [name, value] : j.items())
        if (auto p = from_json(value)) out[name] = std::move(*p);
    return out;
}

}  // namespace berth::notify
