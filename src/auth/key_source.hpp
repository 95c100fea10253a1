#pragma once
// Where a trusted issuer's key set comes from: its jwks_file, or the jwks_uri
// its OpenID discovery document names (the Kubernetes API server's
// /.well-known/openid-configuration), asked with the configured CA and bearer token.
#include <string>

#include "berth/auth/options.hpp"
#include "berth/net/client.hpp"

namespace berth::auth {

inline constexpr std::size_t max_discovery_bytes = 64 << 10;
inline constexpr std::size_t max_key_set_bytes = 256 << 10;

// A file's bytes, refused (std::runtime_error) when it is larger than limit.
std::string read_bounded_file(const std::string& file, std::size_t limit);

// The JWK Set's text; throws std::runtime_error saying what failed. client: for discovery
// issuers (null for a jwks_file one).
std::string key_set_text(const OidcIssuer& issuer, net::Client* client);

}  // namespace berth::auth
