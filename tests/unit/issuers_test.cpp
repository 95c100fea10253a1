// Trusted issuers (auth.oidc): keys from a JWK Set, chosen by kid; service account identities.
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "auth/issuer_documents.hpp"
#include "auth/issuers.hpp"
#include "berth/auth/credential_provider.hpp"
#include "auth/jwt.hpp"
#include "auth/rules.hpp"
#include "berth/oci/encoding.hpp"
#include "temp_dir.hpp"

using namespace berth::auth;
using nlohmann::json;

namespace {

// The public JWK of a PEM private key, as an issuer publishes it.
json public_jwk(const std::string& pem_file, const std::string& kid) {
    std::unique_ptr<FILE, int (*)(FILE*)> in(std::fopen(pem_file.c_str(), "r"), &std::fclose);
    REQUIRE(in);
    std::unique_ptr<EVP_PKEY, void (*)(EVP_PKEY*)> key(PEM_read_PrivateKey(in.get(), nullptr, nullptr, nullptr),
                                                       &EVP_PKEY_free);
    REQUIRE(key);
    auto bytes = [&](const char* name) {
        BIGNUM* bn = nullptr;
        REQUIRE(EVP_PKEY_get_bn_param(key.get(), name, &bn) == 1);
        std::string out(static_cast<std::size_t>(BN_num_bytes(bn)), '\0');
        BN_bn2bin(bn, reinterpret_cast<unsigned char*>(out.data()));
        BN_free(bn);
        return berth::oci::base64url(out);
    };
    if (EVP_PKEY_get_base_id(key.get()) == EVP_PKEY_RSA)
        return {{"kty", "RSA"}, {"kid", kid}, {"use", "sig"}, {"alg", "RS256"}, {"n", bytes("n")}, {"e", bytes("e")}};
    unsigned char point[65];
    std::size_t size = 0;
    REQUIRE(EVP_PKEY_get_octet_string_param(key.get(), OSSL_PKEY_PARAM_PUB_KEY, point, sizeof point, &size) == 1);
    REQUIRE(size == 65);
    auto part = [&](int at) {
        return berth::oci::base64url(std::string_view(reinterpret_cast<char*>(point) + at, 32));
    };
    return {{"kty", "EC"}, {"kid", kid}, {"crv", "P-256"}, {"x", part(1)}, {"y", part(33)}};
}

std::string generate(const TempDir& dir, const std::string& name, bool rsa) {
    auto file = (dir.path() / name).string();
    auto command = rsa ? "openssl genrsa -out " + file + " 2048 2>/dev/null"
                       : "openssl ecparam -name prime256v1 -genkey -noout -out " + file + " 2>/dev/null";
    REQUIRE(std::system(command.c_str()) == 0);
    return file;
}

void write(const std::string& file, const json& doc) { std::ofstream(file) << doc.dump(); }

long long now_s() {
    using namespace std::chrono;
    return duration_cast<seconds>(system_clock::now().time_since_epoch()).count();
}

// A projected service account token's claims, laid out as the API server writes them.
json service_account_claims(const std::string& ns, const std::string& name) {
    const auto t = now_s();
    return {{"aud", {"berth"}},
            {"exp", t + 600},
            {"iat", t},
            {"nbf", t},
            {"iss", "https://kubernetes.default.svc"},
            {"sub", "system:serviceaccount:" + ns + ":" + name},
            {"kubernetes.io",
             {{"namespace", ns},
              {"pod", {{"name", name + "-7d9f"}, {"uid", "0b6f"}}},
              {"serviceaccount", {{"name", name}, {"uid", "8c1e"}}}}}};
}

// A token whose header names the key by kid, as issuers sign them.
std::string sign_with_kid(const JwtKey& key, const std::string& kid, const json& claims) {
    json header = {{"alg", key.algorithm()}, {"typ", "JWT"}, {"kid", kid}};
    auto input = berth::oci::base64url(header.dump()) + "." + berth::oci::base64url(claims.dump());
    return input + "." + berth::oci::base64url(key.sign(input));
}

}  // namespace

TEST_CASE("JWKs become keys: RSA and P-256 only, for signatures only") {
    TempDir dir;
    auto rsa = public_jwk(generate(dir, "r.pem", true), "r1");
    auto ec = public_jwk(generate(dir, "e.pem", false), "e1");
    CHECK(JwtKey::from_jwk(rsa)->algorithm() == "RS256");
    CHECK(JwtKey::from_jwk(rsa)->kid() == "r1");
    CHECK(JwtKey::from_jwk(ec)->algorithm() == "ES256");

    auto encryption = rsa;
    encryption["use"] = "enc";
    CHECK_THROWS(JwtKey::from_jwk(encryption));
    auto wrong_alg = rsa;
    wrong_alg["alg"] = "HS256";
    CHECK_THROWS(JwtKey::from_jwk(wrong_alg));
    auto other_curve = ec;
    other_curve["crv"] = "P-384";
    CHECK_THROWS(JwtKey::from_jwk(other_curve));
    CHECK_THROWS(JwtKey::from_jwk(json{{"kty", "oct"}, {"k", "c2VjcmV0"}}));
    auto short_x = ec;
    short_x["x"] = berth::oci::base64url("short");
    CHECK_THROWS(JwtKey::from_jwk(short_x));
}

TEST_CASE("a service account issuer's token is system:serviceaccount:NS:NAME in its namespace") {
    TempDir dir;
    auto pem = generate(dir, "sa.pem", true);
    auto key = JwtKey::load_private(pem);
    auto jwks = (dir.path() / "jwks.json").string();
    write(jwks, {{"keys", {public_jwk(pem, "k1")}}});
    OidcIssuer issuer;
    issuer.issuer = "https://kubernetes.default.svc";
    issuer.audiences = {"berth"};
    issuer.jwks_file = jwks;
    issuer.max_token_lifetime = std::chrono::hours(1);
    issuer.service_accounts = true;
    TrustedIssuers issuers({issuer}, "");
    std::string error;

    auto claims = service_account_claims("team-a", "builder");
    auto identity = issuers.verify(sign_with_kid(*key, "k1", claims), error);
    REQUIRE(identity);
    const auto& principal = identity->principal;
    CHECK(principal.name == "system:serviceaccount:team-a:builder");
    CHECK(principal.ns == "team-a");
    CHECK(principal.groups == std::vector<std::string>{"system:serviceaccounts", "system:serviceaccounts:team-a"});
    CHECK(identity->expires == claims["exp"].get<std::int64_t>());  // sessions end with the token

    Options options;
    options.rules = {{"${namespace}/**", {"group:system:serviceaccounts"}, {Action::pull, Action::push}}};
    CHECK(allowed_actions(options, principal, "team-a/app").count(Action::push));
    CHECK(allowed_actions(options, principal, "team-b/app").empty());
    CHECK(allowed_actions(options, {"alice"}, "team-a/app").empty());  // no namespace: the rule is not hers

    auto not_an_account = claims;
    not_an_account.erase("kubernetes.io");
    CHECK_FALSE(issuers.verify(sign_with_kid(*key, "k1", not_an_account), error));  // it takes nothing else

    SECTION("refused") {
        auto claims = service_account_claims("team-a", "builder");
        auto refused = [&](const json& c, const std::string& kid = "k1") {
            return !issuers.verify(sign_with_kid(*key, kid, c), error);
        };
        auto expired = claims;
        expired["exp"] = now_s() - 3600;
        CHECK(refused(expired));
        auto early = claims;
        early["nbf"] = now_s() + 3600;
        CHECK(refused(early));
        auto audience = claims;
        audience["aud"] = {"someone-else"};
        CHECK(refused(audience));
        auto issuer_name = claims;
        issuer_name["iss"] = "https://evil.example";
        CHECK(refused(issuer_name));
        CHECK(refused(claims, "k2"));
        CHECK(error == "token signed with a key its issuer does not list");
        auto long_lived = claims;
        long_lived["exp"] = now_s() + 2 * 3600;
        CHECK(refused(long_lived));
        auto no_iat = claims;
        no_iat.erase("iat");
        CHECK(refused(no_iat));
        auto other_key = JwtKey::load_private(generate(dir, "other.pem", true));
        CHECK_FALSE(issuers.verify(sign_with_kid(*other_key, "k1", claims), error));
    }
    SECTION("a rotated key set is read when an unknown kid arrives; an unreadable one keeps the last good") {
        auto next_pem = generate(dir, "next.pem", false);
        write(jwks, {{"keys", {public_jwk(pem, "k1"), public_jwk(next_pem, "k2")}}});
        issuers.refresh();
        auto next = JwtKey::load_private(next_pem);
        CHECK(issuers.verify(sign_with_kid(*next, "k2", service_account_claims("team-b", "ci")), error));
        write(jwks, json::object());  // the issuer answers garbage
        issuers.refresh();
        CHECK(issuers.verify(sign_with_kid(*next, "k2", service_account_claims("team-c", "ci")), error));
    }
}

TEST_CASE("another issuer's names carry its prefix, and its kubernetes.io claim makes no service account") {
    TempDir dir;
    auto pem = generate(dir, "other.pem", true);
    auto key = JwtKey::load_private(pem);
    auto jwks = (dir.path() / "jwks.json").string();
    write(jwks, {{"keys", {public_jwk(pem, "k1")}}});
    OidcIssuer other;
    other.issuer = "https://second-cluster.example";
    other.audiences = {"berth"};
    other.jwks_file = jwks;
    OidcIssuer dex = other;
    dex.issuer = "https://dex.example";
    dex.username_claim = "preferred_username";
    dex.username_prefix = "dex:";
    TrustedIssuers issuers({other, dex}, "");
    std::string error;

    auto claims = service_account_claims("payments", "builder");
    claims["iss"] = other.issuer;
    auto account_elsewhere = issuers.verify(sign_with_kid(*key, "k1", claims), error);
    REQUIRE(account_elsewhere);
    CHECK(account_elsewhere->principal.name ==
          "issuer:https://second-cluster.example#" + claims["sub"].get<std::string>());
    CHECK(account_elsewhere->principal.ns.empty());  // no ${namespace}
    CHECK(account_elsewhere->principal.groups.empty());

    auto admin = claims;
    admin["iss"] = dex.issuer;
    admin["preferred_username"] = "admin";
    admin["groups"] = {"platform"};
    auto identity = issuers.verify(sign_with_kid(*key, "k1", admin), error);
    REQUIRE(identity);
    CHECK(identity->principal.name == "dex:admin");
    CHECK(identity->principal.groups == std::vector<std::string>{"dex:platform"});
    Options options;
    options.rules = {{"admin/**", {"user:admin"}, {Action::pull}}, {"dex/**", {"user:dex:admin"}, {Action::pull}}};
    CHECK(allowed_actions(options, identity->principal, "admin/x").empty());  // the htpasswd user's
    CHECK(allowed_actions(options, identity->principal, "dex/x").count(Action::pull));
}

TEST_CASE("the credential provider answers the kubelet with the pod's token for berth's registries") {
    const auto now = std::chrono::system_clock::now();
    const auto t = now_s();
    const auto token = berth::oci::base64url(R"({"alg":"RS256"})") + "." +
                       berth::oci::base64url(json{{"exp", t + 600}}.dump()) + ".c2ln";
    json request = {{"apiVersion", "credentialprovider.kubelet.k8s.io/v1"},
                    {"kind", "CredentialProviderRequest"},
                    {"image", "berth.registry.svc:5000/team-a/app:v1"},
                    {"serviceAccountToken", token},
                    {"serviceAccountAnnotations", json::object()}};
    auto answer = json::parse(credential_provider_response(request.dump(), {}, now));
    CHECK(answer["apiVersion"] == "credentialprovider.kubelet.k8s.io/v1");
    CHECK(answer["kind"] == "CredentialProviderResponse");
    CHECK(answer["cacheKeyType"] == "Registry");
    CHECK(answer["serviceAccountTokenCacheType"] == "Pod");
    CHECK(answer["cacheDuration"] == "540s");  // until a minute before the token expires
    CHECK(answer["auth"] == json{{"berth.registry.svc:5000", {{"username", "serviceaccount"}, {"password", token}}}});

    CredentialProviderOptions options{{"127.0.0.1:5050", "berth.registry.svc:5000"}, "sa"};
    answer = json::parse(credential_provider_response(request.dump(), options, now));
    CHECK(answer["auth"].size() == 2);
    CHECK(answer["auth"]["127.0.0.1:5050"]["username"] == "sa");

    request["image"] = "nginx:1.27";  // Docker Hub
    CHECK(json::parse(credential_provider_response(request.dump(), {}, now))["auth"].contains("docker.io"));
    request.erase("serviceAccountToken");  // no tokenAttributes in the kubelet's configuration
    answer = json::parse(credential_provider_response(request.dump(), {}, now));
    CHECK_FALSE(answer.contains("auth"));
    CHECK(answer["cacheDuration"] == "0s");

    auto wrong_kind = request;
    wrong_kind["kind"] = "CredentialProviderResponse";
    CHECK_THROWS_AS(credential_provider_response(wrong_kind.dump(), {}, now), std::invalid_argument);
    auto wrong_version = request;
    wrong_version["apiVersion"] = "credentialprovider.kubelet.k8s.io/v1alpha1";
    CHECK_THROWS_AS(credential_provider_response(wrong_version.dump(), {}, now), std::invalid_argument);
    CHECK_THROWS_AS(credential_provider_response("[1,2]", {}, now), std::invalid_argument);
    CHECK_THROWS_AS(credential_provider_response(std::string(2 << 20, ' '), {}, now), std::invalid_argument);
}

TEST_CASE("issuers' documents are read strictly") {
    using berth::auth::jwks_uri_of;
    using berth::auth::service_account_of;
    CHECK(jwks_uri_of(R"({"issuer":"https://k8s","jwks_uri":"https://k8s:6443/openid/v1/jwks"})", "https://k8s", "d") ==
          "https://k8s:6443/openid/v1/jwks");
    CHECK_THROWS(jwks_uri_of(R"({"issuer":"https://evil","jwks_uri":"https://evil/jwks"})", "https://k8s", "d"));
    CHECK_THROWS(jwks_uri_of(R"({"issuer":"https://k8s","jwks_uri":"file:///etc/passwd"})", "https://k8s", "d"));
    CHECK_THROWS(jwks_uri_of(R"(["issuer"])", "https://k8s", "d"));
    CHECK_THROWS(berth::auth::parse_key_set(R"({"keys":[{"kty":"oct","k":"c2VjcmV0"}]})", "k"));
    auto claims = [](const char* ns, const char* name) {
        return nlohmann::json{{"kubernetes.io", {{"namespace", ns}, {"serviceaccount", {{"name", name}}}}}};
    };
    auto account = service_account_of(claims("team-a", "builder.ci"));
    REQUIRE(account);
    CHECK(account->name == "system:serviceaccount:team-a:builder.ci");
    CHECK(account->ns == "team-a");
    for (auto [ns, name] : {std::pair{"*", "ci"},
                            {"team-a/x", "ci"},
                            {"Team-A", "ci"},
                            {"-a", "ci"},
                            {"team-a", "c i"},
                            {"team-a", ""},
                            {"", "ci"}})
        CHECK_FALSE(service_account_of(claims(ns, name)));
}
