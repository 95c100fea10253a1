#pragma once
// Change-log events. Replicas apply these, so each names its origin replica and
// carries the stamp that decides which write wins.
#include <string>

#include "berth/storage/records.hpp"

namespace berth::registry::events {

std::string link(const std::string& repo, const std::string& digest, const storage::Stamp& stamp);
std::string unlink(const std::string& repo, const std::string& digest, const storage::Stamp& stamp);
std::string manifest(const std::string& repo, const std::string& digest, const storage::Stamp& stamp);
std::string manifest_deleted(const std::string& repo, const std::string& digest, const storage::Stamp& stamp);
std::string tag(const std::string& repo, const std::string& tag, const std::string& digest,
                const storage::Stamp& stamp);
std::string tag_deleted(const std::string& repo, const std::string& tag, const storage::Stamp& stamp);

}  // namespace berth::registry::events
