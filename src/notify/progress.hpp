#pragma once
// How far events reached an endpoint, as every replica keeps it and merges its peers' word into
// it: the replica delivering moves it on, the others learn it from a peer, so whichever replica
// takes over resumes where the last one stopped. Merging is a maximum, so the order and the
// number of times replicas hear of each other do not matter.
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "berth/storage/records.hpp"

namespace berth::notify {

struct Progress {
    std::uint64_t generation = 0;                  // hybrid clock of the last replay: a newer one wins outright
    std::uint64_t floor = 0;                       // every change stamped at or below it is behind us
    std::map<std::string, std::uint64_t> origins;  // per origin replica, its last change behind us
    std::uint64_t disabled = 0, enabled = 0;       // hybrid clocks of the last 410 and re-enabling
    std::string disabled_reason;

    bool covers(const storage::Stamp& stamp) const;
    void pass(const storage::Stamp& stamp);
    bool is_disabled() const { return disabled > enabled; }
    void merge(const Progress& other);
    friend bool operator==(const Progress&, const Progress&) = default;
};

// The settings value (storage/layout.hpp) and, keyed by endpoint, what peers tell each other.
std::string encode_progress(const Progress& progress);
std::optional<Progress> parse_progress(const std::string& text);
std::string encode_progress_map(const std::map<std::string, Progress>& all);
// What of the text is well-formed; nothing from a body that is not an object.
std::map<std::string, Progress> parse_progress_map(const std::string& text);

}  // namespace berth::notify
