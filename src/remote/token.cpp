#include "berth/remote/token.hpp"

#include <algorithm>

#include "berth/oci/json.hpp"

namespace berth::remote {
namespace {

constexpr std::size_t max_depth = 16;
// Tokens are opaque text; longer ones are refused rather than sent back.
constexpr std::size_t max_token_chars = 16 << 10;

}  // namespace

std::optional<Token> parse_token(std::string_view body) {
    if (body.size() > max_token_bytes) return std::nullopt;
    auto doc = oci::parse_json(body, {.max_depth = max_depth});
    if (!doc.is_object()) return std::nullopt;
    std::string value;
    for (const char* key : {"token", "access_token"})
        if (auto it = doc.find(key); it != doc.end() && it->is_string() && !it->get_ref<const std::string&>().empty()) {
            value = it->get<std::string>();
            break;
        }
    if (value.empty() || value.size() > max_token_chars) return std::nullopt;
    // Printable ASCII only: the token goes back out in a header.
    if (std::any_of(value.begin(), value.end(), [](char c) { return c < 0x21 || c > 0x7e; })) return std::nullopt;
    std::int64_t expires_in = 60;
    if (auto it = doc.find("expires_in"); it != doc.end() && it->is_number_integer())
        expires_in = it->get<std::int64_t>();
    return Token{std::move(value), std::chrono::seconds(std::clamp<std::int64_t>(expires_in, 20, 3600) - 10)};
}

}  // namespace berth::remote
