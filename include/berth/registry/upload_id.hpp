#pragma once
// Upload session ids, made and read here only: "<replica id>_<UUID v4>". The
// replica that opened a session owns it; another replica passes requests for
// it on. Replica ids are [a-z0-9-], so the first '_' ends the owner. Whether a
// text can be one is oci::valid_upload_id's to say.
#include <string>
#include <string_view>

namespace berth::registry {

std::string new_upload_id(const std::string& replica_id);
// The replica that opened the session.
std::string_view upload_owner(std::string_view id);

}  // namespace berth::registry
