#include "events.hpp"

#include <nlohmann/json.hpp>

namespace berth::registry::events {
namespace {

std::string event(const char* type, const std::string& repo, const storage::Stamp& stamp, nlohmann::json fields) {
    fields["type"] = type;
    fields["repo"] = repo;
    fields["clock"] = stamp.clock;
    fields["origin"] = stamp.replica;
    return fields.dump();
}

}  // namespace

std::string link(const std::string& repo, const std::string& digest, const storage::Stamp& stamp) {
    return event("link", repo, stamp, {{"digest", digest}});
}
std::string unlink(const std::string& repo, const std::string& digest, const storage::Stamp& stamp) {
    return event("unlink", repo, stamp, {{"digest", digest}});
}
std::string manifest(const std::string& repo, const std::string& digest, const storage::Stamp& stamp) {
    return event("manifest", repo, stamp, {{"digest", digest}});
}
std::string manifest_deleted(const std::string& repo, const std::string& digest, const storage::Stamp& stamp) {
    return event("manifest_deleted", repo, stamp, {{"digest", digest}});
}
std::string tag(const std::string& repo, const std::string& tag, const std::string& digest,
                const storage::Stamp& stamp) {
    return event("tag", repo, stamp, {{"tag", tag}, {"digest", digest}});
}
std::string tag_deleted(const std::string& repo, const std::string& tag, const storage::Stamp& stamp) {
    return event("tag_deleted", repo, stamp, {{"tag", tag}});
}

}  // namespace berth::registry::events
