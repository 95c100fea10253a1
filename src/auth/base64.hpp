#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace berth::auth {

std::string base64url_encode(std::string_view bytes);
// Accepts padding or none; nullopt on any other character.
std::optional<std::string> base64url_decode(std::string_view text);
// Standard alphabet, for Basic credentials.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace berth::auth
