// Public keys from JSON Web Keys (RFC 7517, 7518): what an issuer's JWKS endpoint or file holds.
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "berth/oci/encoding.hpp"
#include "jwt.hpp"

namespace berth::auth {
namespace {

using nlohmann::json;

std::string field(const json& jwk, const char* key) {
    auto it = jwk.find(key);
    if (it == jwk.end() || !it->is_string()) throw std::invalid_argument(std::string("a JWK without ") + key);
    return it->get<std::string>();
}

std::string decoded(const json& jwk, const char* key) {
    auto bytes = oci::base64url_decode(field(jwk, key));
    if (!bytes || bytes->empty()) throw std::invalid_argument(std::string("a JWK whose ") + key + " is not base64url");
    return std::move(*bytes);
}

using ParamBuild = std::unique_ptr<OSSL_PARAM_BLD, void (*)(OSSL_PARAM_BLD*)>;
using Params = std::unique_ptr<OSSL_PARAM, void (*)(OSSL_PARAM*)>;
using Bignum = std::unique_ptr<BIGNUM, void (*)(BIGNUM*)>;

EVP_PKEY* from_params(const char* type, OSSL_PARAM_BLD* build) {
    Params params(OSSL_PARAM_BLD_to_param(build), &OSSL_PARAM_free);
    std::unique_ptr<EVP_PKEY_CTX, void (*)(EVP_PKEY_CTX*)> ctx(EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr),
                                                               &EVP_PKEY_CTX_free);
    EVP_PKEY* key = nullptr;
    if (!params || !ctx || EVP_PKEY_fromdata_init(ctx.get()) != 1 ||
        EVP_PKEY_fromdata(ctx.get(), &key, EVP_PKEY_PUBLIC_KEY, params.get()) != 1)
        throw std::invalid_argument(std::string("a JWK that is no valid ") + type + " public key");
    return key;
}

Bignum bignum(const std::string& bytes) {
    return Bignum(
        BN_bin2bn(reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()), nullptr),
        &BN_free);
}

EVP_PKEY* rsa_key(const json& jwk) {
    auto n = bignum(decoded(jwk, "n")), e = bignum(decoded(jwk, "e"));
    ParamBuild build(OSSL_PARAM_BLD_new(), &OSSL_PARAM_BLD_free);
    if (!n || !e || !build || OSSL_PARAM_BLD_push_BN(build.get(), OSSL_PKEY_PARAM_RSA_N, n.get()) != 1 ||
        OSSL_PARAM_BLD_push_BN(build.get(), OSSL_PKEY_PARAM_RSA_E, e.get()) != 1)
        throw std::invalid_argument("a JWK that is no valid RSA public key");
    return from_params("RSA", build.get());
}

EVP_PKEY* ec_key(const json& jwk) {
    if (field(jwk, "crv") != "P-256") throw std::invalid_argument("an EC JWK not on P-256");
    auto x = decoded(jwk, "x"), y = decoded(jwk, "y");
    if (x.size() != 32 || y.size() != 32) throw std::invalid_argument("a P-256 JWK whose x or y is not 32 bytes");
    const std::string point = "\x04" + x + y;  // uncompressed
    ParamBuild build(OSSL_PARAM_BLD_new(), &OSSL_PARAM_BLD_free);
    if (!build || OSSL_PARAM_BLD_push_utf8_string(build.get(), OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) != 1 ||
        OSSL_PARAM_BLD_push_octet_string(build.get(), OSSL_PKEY_PARAM_PUB_KEY, point.data(), point.size()) != 1)
        throw std::invalid_argument("a JWK that is no valid EC public key");
    return from_params("EC", build.get());
}

}  // namespace

std::shared_ptr<JwtKey> JwtKey::from_jwk(const json& jwk) {
    if (!jwk.is_object()) throw std::invalid_argument("a JWK that is not an object");
    if (auto use = jwk.find("use"); use != jwk.end() && *use != "sig")
        throw std::invalid_argument("a JWK not for signatures");
    const auto kty = field(jwk, "kty");
    EVP_PKEY* key = kty == "RSA"  ? rsa_key(jwk)
                    : kty == "EC" ? ec_key(jwk)
                                  : throw std::invalid_argument("a JWK of type " + kty + " (RSA or EC only)");
    auto out = std::shared_ptr<JwtKey>(new JwtKey(key, jwk.value("kid", std::string())));
    // A key declares the one algorithm it may be used with; it must be the one its type implies.
    if (auto alg = jwk.find("alg"); alg != jwk.end() && *alg != out->algorithm())
        throw std::invalid_argument("a JWK whose alg is not " + out->algorithm());
    return out;
}

}  // namespace berth::auth
