#pragma once
// JSON Web Tokens signed with RS256 or ES256 (P-256), as the docker token spec
// uses them. Verification trusts only keys configured here: the token's own
// header may pick among them (kid) but can never supply key material (jwk,
// x5c, jku are ignored), unlike what CVE-2025-24976 exploited.
#include <chrono>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace berth::auth {

class JwtKey {
public:
    static std::shared_ptr<JwtKey> load_private(const std::string& pem_file);
    static std::shared_ptr<JwtKey> load_public(const std::string& pem_file);
    // A public key of a JWK Set (RFC 7517): RSA, or EC on P-256; its kid is the JWK's own.
    // Throws std::invalid_argument for any other kind, or a key not for signatures.
    static std::shared_ptr<JwtKey> from_jwk(const nlohmann::json& jwk);
    ~JwtKey();
    JwtKey(const JwtKey&) = delete;
    JwtKey& operator=(const JwtKey&) = delete;

    const std::string& algorithm() const { return algorithm_; }  // "RS256" or "ES256"
    const std::string& kid() const { return kid_; }
    std::string sign(std::string_view data) const;
    bool verify(std::string_view data, std::string_view signature) const;

private:
    explicit JwtKey(void* pkey, std::string kid = {});
    void* pkey_;  // EVP_PKEY*
    std::string algorithm_, kid_;
};

inline constexpr std::size_t max_token_bytes = 8192;

std::string sign_jwt(const JwtKey& key, const nlohmann::json& claims);

struct TokenCheck {
    std::string issuer;
    std::vector<std::string> audiences;  // aud must hold one of them
    std::chrono::system_clock::time_point now;
    std::chrono::seconds leeway{30};
    // exp - iat above this is refused, and so is a token without iat; 0: no limit.
    std::chrono::seconds max_lifetime{0};
};

// What a token's header and claims say before anything is verified: only for
// choosing the issuer and key to verify it with. nullopt for no JWT at all.
struct UnverifiedToken {
    std::string alg, kid, issuer;
    std::optional<long long> expires;  // exp, seconds since the epoch
};
std::optional<UnverifiedToken> peek_jwt(std::string_view token);

// The claims of a token whose signature, algorithm, expiry, not-before,
// issued-at, lifetime, issuer and audience all check out; nullopt otherwise,
// with the reason in error.
std::optional<nlohmann::json> verify_jwt(std::string_view token, const std::vector<std::shared_ptr<JwtKey>>& keys,
                                         const TokenCheck& check, std::string& error);

}  // namespace berth::auth
