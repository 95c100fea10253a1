#include "berth/registry/upload_id.hpp"

#include "berth/oci/encoding.hpp"

namespace berth::registry {

std::string new_upload_id(const std::string& replica_id) {
    auto bytes = oci::random_bytes(16);
    bytes[6] = static_cast<char>((bytes[6] & 0x0f) | 0x40);  // UUID version 4
    bytes[8] = static_cast<char>((bytes[8] & 0x3f) | 0x80);  // RFC 4122 variant
    auto digits = oci::hex(bytes);
    return replica_id + "_" + digits.substr(0, 8) + "-" + digits.substr(8, 4) + "-" + digits.substr(12, 4) + "-" +
           digits.substr(16, 4) + "-" + digits.substr(20);
}

std::string_view upload_owner(std::string_view id) { return id.substr(0, id.find('_')); }

}  // namespace berth::registry
