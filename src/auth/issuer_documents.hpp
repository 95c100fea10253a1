#pragma once
// What trusted issuers send, read: their discovery documents, their JWK Sets,
// and the claims of the tokens they sign. All of it is untrusted input,
// bounded here (tests/fuzz/fuzz_tokens.cpp).
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "berth/auth/authorizer.hpp"
#include "berth/auth/options.hpp"
#include "jwt.hpp"

namespace berth::auth {

inline constexpr std::size_t max_keys = 64;
inline constexpr std::size_t max_groups = 256;

// The jwks_uri of an OpenID discovery document about `issuer` (whose `issuer` field must be
// that one, OpenID Connect Discovery 1.0 section 4.3); throws std::runtime_error naming `where`.
std::string jwks_uri_of(std::string_view document, const std::string& issuer, const std::string& where);

// The usable signing keys of a JWK Set, at most max_keys; throws std::runtime_error when none is.
std::vector<std::shared_ptr<JwtKey>> parse_key_set(std::string_view text, const std::string& where);

// A Kubernetes service account token's identity from its claims, as the API server's own
// authenticator names it: system:serviceaccount:NS:NAME, in system:serviceaccounts and
// system:serviceaccounts:NS. nullopt without a kubernetes.io claim, or with a namespace or
// name Kubernetes would not allow (the namespace goes into rules as ${namespace}).
std::optional<Principal> service_account_of(const nlohmann::json& claims);

// Who verified claims stand for, each name and group with the issuer's prefix: for a service
// account issuer its service account (nothing else), for any other issuer username_claim with
// the groups of groups_claim (at most max_groups). An empty name, with the reason in error, when
// there is none.
Principal principal_of(const OidcIssuer& issuer, const nlohmann::json& claims, std::string& error);

}  // namespace berth::auth
