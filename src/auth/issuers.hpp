#pragma once
// Identities from tokens other issuers signed (auth.oidc): Kubernetes service
// account tokens, Keycloak or Dex. A token's key comes from its issuer's key
// set, chosen by kid, never from the token; RS256 and ES256 only.
#include <chrono>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "berth/auth/authorizer.hpp"
#include "berth/auth/options.hpp"
#include "berth/observe/metrics.hpp"

namespace berth::auth {

// Who a trusted issuer's token stands for, and until when (its exp, Unix seconds).
struct IssuedIdentity {
    Principal principal;
    std::int64_t expires = 0;
};

class TrustedIssuers {
public:
    // Reads every jwks_file issuer's key set, throwing std::runtime_error naming a file that cannot be
    // used. A discovery issuer starts from the set kept in cache_dir (when one is) and is asked at
    // once on a thread of its own: an issuer out of reach does not hold up the start.
    TrustedIssuers(std::vector<OidcIssuer> issuers, const std::string& cache_dir);
    ~TrustedIssuers();

    bool empty() const;
    // The principal a token stands for, when one of the issuers signed it and its claims
    // check out; nullopt otherwise, with the reason in error.
    std::optional<IssuedIdentity> verify(std::string_view token, std::string& error) const;
    // Reads the key sets again; a set that cannot be read keeps the last good one.
    void refresh();
    void write_metrics(observe::MetricsWriter& out) const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace berth::auth
