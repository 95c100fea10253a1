#pragma once
// The byte encodings berth writes and reads, each in one place: lower-case hex
// (digests, ids, cursors), base64 (Basic credentials) and unpadded base64url
// (JWTs), and random bytes from OpenSSL's generator.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace berth::oci {

std::string hex(std::string_view bytes);
// The bytes of lower-case hex; nothing for odd lengths or other characters.
std::optional<std::string> unhex(std::string_view text);

std::string base64(std::string_view bytes);     // padded, + and /
std::string base64url(std::string_view bytes);  // unpadded, - and _
// Both accept text with or without padding; nothing for other characters.
std::optional<std::string> base64_decode(std::string_view text);
std::optional<std::string> base64url_decode(std::string_view text);

// Throws std::runtime_error when OpenSSL's generator fails, never returns weak bytes.
std::string random_bytes(std::size_t count);
inline std::string random_hex(std::size_t count) { return hex(random_bytes(count)); }

// Whether a presented secret is the expected one, in time that does not depend on where they differ.
bool equal_secrets(std::string_view presented, std::string_view expected);

}  // namespace berth::oci
