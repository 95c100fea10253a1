#pragma once
// Change-log events. Replicas apply these, so each names its origin replica and
// carries the stamp that decides which write wins.
#include <optional>
#include <string>

#include "berth/storage/records.hpp"

namespace berth::storage {

struct Event {
    enum class Type { link, unlink, manifest, manifest_deleted, tag, tag_deleted };
    Type type;
    std::string repo;
    std::string digest;  // empty for tag_deleted
    std::string tag;     // tag and tag_deleted only
    Stamp stamp;         // stamp.replica is the origin
    // Why the change was made, when not by a client: "retention". Replicas keep it as they apply the
    // event, so whichever replica tells receivers of the change tells why.
    std::string cause = {};
    // Who asked for it (a principal's name), "" for anonymous callers and changes no client asked for.
    std::string principal = {};

    std::string json() const;
    // nullopt for anything that is not a well-formed event.
    static std::optional<Event> parse(const std::string& json);
};

}  // namespace berth::storage
