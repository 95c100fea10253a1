#include "jwt.hpp"
#include "berth/oci/encoding.hpp"
#include "berth/oci/json.hpp"

#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace berth::auth {
namespace {

using nlohmann::json;

EVP_PKEY* pkey(void* p) { return static_cast<EVP_PKEY*>(p); }

template <typename Read>
EVP_PKEY* read_pem(const std::string& file, Read read) {
    std::unique_ptr<FILE, int (*)(FILE*)> in(std::fopen(file.c_str(), "r"), &std::fclose);
    if (!in) throw std::runtime_error("cannot read key file " + file);
    EVP_PKEY* key = read(in.get());
    if (!key) throw std::runtime_error("no PEM key in " + file);
    return key;
}

// JWS carries ECDSA signatures as r||s (32 bytes each); OpenSSL speaks DER.
std::string der_to_raw(const std::string& der) {
    auto* data = reinterpret_cast<const unsigned char*>(der.data());
    std::unique_ptr<ECDSA_SIG, void (*)(ECDSA_SIG*)> sig(d2i_ECDSA_SIG(nullptr, &data, static_cast<long>(der.size())),
                                                         &ECDSA_SIG_free);
    if (!sig) throw std::runtime_error("bad ECDSA signature");
    const BIGNUM *r, *s;
    ECDSA_SIG_get0(sig.get(), &r, &s);
    std::string raw(64, '\0');
    BN_bn2binpad(r, reinterpret_cast<unsigned char*>(raw.data()), 32);
    BN_bn2binpad(s, reinterpret_cast<unsigned char*>(raw.data()) + 32, 32);
    return raw;
}

std::optional<std::string> raw_to_der(std::string_view raw) {
    if (raw.size() != 64) return std::nullopt;
    std::unique_ptr<ECDSA_SIG, void (*)(ECDSA_SIG*)> sig(ECDSA_SIG_new(), &ECDSA_SIG_free);
    auto* bytes = reinterpret_cast<const unsigned char*>(raw.data());
    if (ECDSA_SIG_set0(sig.get(), BN_bin2bn(bytes, 32, nullptr), BN_bin2bn(bytes + 32, 32, nullptr)) != 1)
        return std::nullopt;
    int size = i2d_ECDSA_SIG(sig.get(), nullptr);
    std::string der(static_cast<std::size_t>(size), '\0');
    auto* out = reinterpret_cast<unsigned char*>(der.data());
    i2d_ECDSA_SIG(sig.get(), &out);
    return der;
}

}  // namespace

JwtKey::JwtKey(void* key, std::string kid) : pkey_(key), kid_(std::move(kid)) {
    const int type = EVP_PKEY_get_base_id(pkey(key));
    if (type == EVP_PKEY_RSA && EVP_PKEY_get_bits(pkey(key)) >= 2048) algorithm_ = "RS256";
    else if (type == EVP_PKEY_EC && EVP_PKEY_get_bits(pkey(key)) == 256) algorithm_ = "ES256";
    else {
        EVP_PKEY_free(pkey(key));
        throw std::runtime_error("token keys must be RSA (2048 bits or more) or EC P-256");
    }
    if (!kid_.empty()) return;
    // kid: a fingerprint of the public key, so a verifier can tell keys apart.
    unsigned char* der = nullptr;
    int size = i2d_PUBKEY(pkey(key), &der);
    unsigned char digest[32];
    unsigned digest_size = 0;
    EVP_Digest(der, static_cast<std::size_t>(size), digest, &digest_size, EVP_sha256(), nullptr);
    OPENSSL_free(der);
    kid_ = oci::base64url(std::string_view(reinterpret_cast<char*>(digest), 12));
}

JwtKey::~JwtKey() { EVP_PKEY_free(pkey(pkey_)); }

std::shared_ptr<JwtKey> JwtKey::load_private(const std::string& file) {
    return std::shared_ptr<JwtKey>(
        new JwtKey(read_pem(file, [](FILE* f) { return PEM_read_PrivateKey(f, nullptr, nullptr, nullptr); })));
}

std::shared_ptr<JwtKey> JwtKey::load_public(const std::string& file) {
    return std::shared_ptr<JwtKey>(new JwtKey(read_pem(file, [](FILE* f) {
        EVP_PKEY* key = PEM_read_PUBKEY(f, nullptr, nullptr, nullptr);
        if (key) return key;
        // A certificate holding the key works too.
        std::rewind(f);
        X509* cert = PEM_read_X509(f, nullptr, nullptr, nullptr);
        if (!cert) return static_cast<EVP_PKEY*>(nullptr);
        key = X509_get_pubkey(cert);
        X509_free(cert);
        return key;
    })));
}

std::string JwtKey::sign(std::string_view data) const {
    std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
    std::size_t size = 0;
    if (EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, pkey(pkey_)) != 1 ||
        EVP_DigestSign(ctx.get(), nullptr, &size, reinterpret_cast<const unsigned char*>(data.data()), data.size()) !=
            1)
        throw std::runtime_error("signing failed");
    std::string signature(size, '\0');
    if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(signature.data()), &size,
                       reinterpret_cast<const unsigned char*>(data.data()), data.size()) != 1)
        throw std::runtime_error("signing failed");
    signature.resize(size);
    return algorithm_ == "ES256" ? der_to_raw(signature) : signature;
}

bool JwtKey::verify(std::string_view data, std::string_view signature) const {
    std::string der;
    if (algorithm_ == "ES256") {
        auto converted = raw_to_der(signature);
        if (!converted) return false;
        der = std::move(*converted);
        signature = der;
    }
    std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
    return EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, pkey(pkey_)) == 1 &&
           EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()), signature.size(),
                            reinterpret_cast<const unsigned char*>(data.data()), data.size()) == 1;
}

std::string sign_jwt(const JwtKey& key, const json& claims) {
    json header = {{"alg", key.algorithm()}, {"typ", "JWT"}, {"kid", key.kid()}};
    auto signing_input = oci::base64url(header.dump()) + "." + oci::base64url(claims.dump());
    return signing_input + "." + oci::base64url(key.sign(signing_input));
}

namespace {

struct Parts {
    json header, claims;
    std::string signature;
    std::string_view signing_input;
};

// A token's three parts decoded, bounded like all untrusted JSON; nullopt for anything else.
std::optional<Parts> split_jwt(std::string_view token) {
    if (token.size() > max_token_bytes) return std::nullopt;
    auto first = token.find('.'), second = token.rfind('.');
    if (first == std::string_view::npos || first == second) return std::nullopt;
    auto header_text = oci::base64url_decode(token.substr(0, first));
    auto claims_text = oci::base64url_decode(token.substr(first + 1, second - first - 1));
    auto signature = oci::base64url_decode(token.substr(second + 1));
    if (!header_text || !claims_text || !signature) return std::nullopt;
    Parts parts{oci::parse_json(*header_text), oci::parse_json(*claims_text), std::move(*signature),
                token.substr(0, second)};
    if (!parts.header.is_object() || !parts.claims.is_object() || !parts.header.contains("alg") ||
        !parts.header["alg"].is_string())
        return std::nullopt;
    return parts;
}

std::string string_field(const json& object, const char* key) {
    auto it = object.find(key);
    return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

std::optional<UnverifiedToken> peek_jwt(std::string_view token) {
    auto parts = split_jwt(token);
    if (!parts) return std::nullopt;
    std::optional<long long> expires;
    if (auto exp = parts->claims.find("exp"); exp != parts->claims.end() && exp->is_number())
        expires = exp->get<long long>();
    return UnverifiedToken{string_field(parts->header, "alg"), string_field(parts->header, "kid"),
                           string_field(parts->claims, "iss"), expires};
}

std::optional<json> verify_jwt(std::string_view token, const std::vector<std::shared_ptr<JwtKey>>& keys,
                               const TokenCheck& check, std::string& error) {
    if (token.size() > max_token_bytes) {
        error = "token too large";
        return std::nullopt;
    }
    auto parts = split_jwt(token);
    if (!parts) {
        error = "malformed token";
        return std::nullopt;
    }
    // Plain references, not a structured binding: lambdas below use them, which clang 14 (the fuzz
    // build) does not allow for bindings.
    auto& header = parts->header;
    auto& claims = parts->claims;
    const auto& signature = parts->signature;
    const auto signing_input = parts->signing_input;
    const auto alg = header["alg"].get<std::string>();
    // kid is not consulted here: every key given is trusted (callers that
    // pick by kid pass only that key), and trying each costs less than agreeing
    // on one fingerprint format with every issuer.
    bool verified = false;
    for (auto& key : keys) {
        // The algorithm must be the key's own: no "none", no HS256 keyed with a public key.
        if (key->algorithm() != alg) continue;
        if (key->verify(signing_input, signature)) {
            verified = true;
            break;
        }
    }
    if (!verified) {
        error = "token signature not valid for any trusted key";
        return std::nullopt;
    }
    using namespace std::chrono;
    const auto now = duration_cast<seconds>(check.now.time_since_epoch()).count();
    auto number = [&](const char* key) -> std::optional<long long> {
        auto it = claims.find(key);
        if (it == claims.end() || !it->is_number()) return std::nullopt;
        return it->get<long long>();
    };
    auto exp = number("exp");
    if (!exp || *exp + check.leeway.count() < now) {
        error = "token expired";
        return std::nullopt;
    }
    if (auto nbf = number("nbf"); nbf && *nbf - check.leeway.count() > now) {
        error = "token not valid yet";
        return std::nullopt;
    }
    auto iat = number("iat");
    if (iat && *iat - check.leeway.count() > now) {
        error = "token issued in the future";
        return std::nullopt;
    }
    if (check.max_lifetime.count() && (!iat || *exp - *iat > check.max_lifetime.count())) {
        error = "token lifetime is longer than this registry accepts";
        return std::nullopt;
    }
    if (claims.value("iss", std::string()) != check.issuer) {
        error = "token issuer not trusted";
        return std::nullopt;
    }
    auto aud = claims.find("aud");
    auto names = [&](const std::string& audience) {
        return aud != claims.end() &&
               ((aud->is_string() && aud->get<std::string>() == audience) ||
                (aud->is_array() && std::find(aud->begin(), aud->end(), audience) != aud->end()));
    };
    if (std::none_of(check.audiences.begin(), check.audiences.end(), names)) {
        error = "token audience is not this registry";
        return std::nullopt;
    }
    return claims;
}

}  // namespace berth::auth
