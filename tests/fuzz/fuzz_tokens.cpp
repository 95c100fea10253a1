// What a token issuer or a client sends berth's identity code, read as berth
// reads it: bearer tokens (peeked and verified), JWK Sets, OpenID discovery
// documents and the claims of service account tokens. None may throw past its
// own contract or crash, and each keeps its promises: nothing that was not
// signed with the key verifies (alg none, HS256 with the public key, a key in
// the header); a key set holds at most max_keys RS256/ES256 keys; a discovery
// document yields only a parseable URL; a service account's namespace is one
// path component.
//
// Input: the first byte picks the reader.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>

#include "auth/issuer_documents.hpp"
#include "auth/jwt.hpp"
#include "berth/net/host_port.hpp"
#include "berth/oci/json.hpp"
#include "berth/oci/names.hpp"
#include "fuzz_check.hpp"

namespace {

using namespace berth;

// A fixed P-256 public key (RFC 7515 appendix A.3's): tokens are verified against it.
const std::vector<std::shared_ptr<auth::JwtKey>>& keys() {
    static const std::vector<std::shared_ptr<auth::JwtKey>> set{
        auth::JwtKey::from_jwk({{"kty", "EC"},
                                {"crv", "P-256"},
                                {"kid", "k1"},
                                {"x", "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU"},
                                {"y", "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}})};
    return set;
}

void token(std::string_view text) {
    auto peeked = auth::peek_jwt(text);
    if (peeked) FUZZ_CHECK(text.size() <= auth::max_token_bytes);
    std::string error;
    auto claims =
        auth::verify_jwt(text, keys(), {"https://issuer", {"berth"}, std::chrono::system_clock::now()}, error);
    // Only the holder of the private key can make a token that verifies.
    FUZZ_CHECK(!claims);
    FUZZ_CHECK(!error.empty());
}

void key_set(std::string_view text) {
    try {
        auto set = auth::parse_key_set(text, "fuzz");
        FUZZ_CHECK(!set.empty() && set.size() <= auth::max_keys);
        for (auto& key : set) FUZZ_CHECK(key->algorithm() == "RS256" || key->algorithm() == "ES256");
    } catch (const std::runtime_error&) {}
}

void discovery(std::string_view text) {
    try {
        auto uri = auth::jwks_uri_of(text, "https://issuer", "fuzz");
        net::parse_url(uri);  // throws std::invalid_argument, which the fuzzer reports, if it does not parse
    } catch (const std::runtime_error&) {}
}

void claims(std::string_view text) {
    auto doc = oci::parse_json(text);
    if (doc.is_discarded()) return;
    std::string error;
    auto principal = auth::principal_of({.issuer = "https://issuer"}, doc, error);
    FUZZ_CHECK(principal.groups.size() <= auth::max_groups + 2);
    if (!principal.ns.empty()) {
        FUZZ_CHECK(oci::valid_repository_name(principal.ns) && principal.ns.find('/') == std::string::npos);
        FUZZ_CHECK(principal.name.starts_with("system:serviceaccount:" + principal.ns + ":"));
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
    switch (data[0] % 4) {
        case 0: token(input); break;
        case 1: key_set(input); break;
        case 2: discovery(input); break;
        case 3: claims(input); break;
    }
    return 0;
}
