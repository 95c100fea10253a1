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
    ~JwtKey();
    JwtKey(const JwtKey&) = delete;
    JwtKey& operator=(const JwtKey&) = delete;

    const std::string& algorithm() const { return algorithm_; }  // "RS256" or "ES256"
    const std::string& kid() const { return kid_; }
    std::string sign(std::string_view data) const;
    bool verify(std::string_view data, std::string_view signature) const;

private:
    explicit JwtKey(void* pkey);
    void* pkey_;  // EVP_PKEY*
    std::string algorithm_, kid_;
};

inline constexpr std::size_t max_token_bytes = 8192;

std::string sign_jwt(const JwtKey& key, const nlohmann::json& claims);

struct TokenCheck {
    std::string issuer, audience;
    std::chrono::system_clock::time_point now;
    std::chrono::seconds leeway{30};
};

// The claims of a token whose signature, algorithm, expiry, not-before,
// issuer and audience all check out; nullopt otherwise, with the reason in error.
std::optional<nlohmann::json> verify_jwt(std::string_view token, const std::vector<std::shared_ptr<JwtKey>>& keys,
                                         const TokenCheck& check, std::string& error);

}  // namespace berth::auth
