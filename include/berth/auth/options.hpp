#pragma once
#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace berth::auth {

enum class Action { pull, push, del };

// Who may do what where. `repository` is a glob: '*' stays within one path
// component, '**' crosses them, "${user}" stands for the caller's name and
// "${namespace}" for a Kubernetes service account's namespace.
// principals: "user:NAME", "group:NAME", "authenticated", "anonymous". Names
// carry their source (docs/auth.md): an htpasswd user is NAME, an LDAP user
// ldap:NAME, an issuer's user issuer:ISS#NAME (or each source's own prefix), so
// two sources never share a name.
struct Rule {
    std::string repository;
    std::vector<std::string> principals;
    std::vector<Action> actions;
};

// An issuer whose tokens are identities here (auth.oidc): Kubernetes' service
// account issuer, Keycloak, Dex. docs/auth.md.
struct OidcIssuer {
    std::string issuer;                  // must equal the token's iss
    std::vector<std::string> audiences;  // the token's aud must hold one of these
    std::string jwks_file;               // the issuer's public keys (a JWK Set), or:
    std::string discovery_url;           // {issuer}/.well-known/openid-configuration, followed to jwks_uri
    std::string ca_file;                 // TLS trust for discovery and JWKS; empty: the system's
    std::string bearer_token_file;       // presented to discovery and JWKS (the API server wants one)
    std::string username_claim = "sub";
    std::string groups_claim = "groups";
    std::chrono::seconds max_token_lifetime{0};  // exp - iat above this is refused; 0: no limit
    // A cluster's service account issuer: its tokens are service accounts (system:serviceaccount:NS:NAME,
    // ${namespace}), and it takes nothing else. No other issuer's tokens are ever read as service accounts.
    bool service_accounts = false;
    // Put before every name and group this issuer's tokens give; by default "issuer:ISS#", or ""
    // for a service account issuer (the names Kubernetes itself uses).
    std::string username_prefix, groups_prefix;

    std::string user_prefix() const {
        if (!username_prefix.empty() || service_accounts) return username_prefix;
        return "issuer:" + issuer + "#";
    }
    std::string group_prefix() const {
        if (!groups_prefix.empty() || service_accounts) return groups_prefix;
        return user_prefix();
    }
};

// A site directory (auth.ldap): Basic logins are looked up with user_filter, then bound as the
// user; each group group_filter finds becomes group:CN. docs/auth.md.
struct LdapOptions {
    std::string url;  // ldaps://host[:port], or ldap://host[:port], always with StartTLS
    std::string ca_file;
    std::string bind_dn, bind_password;  // the searching account; empty: anonymous search
    std::string user_search_base;
    std::string user_filter = "(&(objectClass=inetOrgPerson)(uid={username}))";
    std::string group_search_base;  // empty: no groups
    std::string group_filter = "(&(objectClass=groupOfNames)(member={dn}))";
    std::chrono::seconds timeout{5};         // each connect, TLS handshake, bind and search
    std::chrono::seconds cache_seconds{60};  // a successful login is not asked again for this long
    std::string username_prefix = "ldap:";   // the principal is this + the name (normalized, lower case)
    std::string groups_prefix = "ldap:";     // group:<this>CN for each group found
    bool enabled() const { return !url.empty(); }
};

struct Options {
    std::string htpasswd_file;  // enables Basic authentication
    // Bearer tokens (docker token spec). A signing key also enables the
    // built-in token endpoint at /auth/token.
    std::string token_signing_key_file;
    std::vector<std::string> token_verify_key_files;  // an external issuer's public keys
    std::string token_issuer = "berth";
    std::string token_service = "berth";
    std::string token_realm;  // absolute URL; empty: derived from the request's Host
    std::chrono::seconds token_ttl{300};
    std::vector<OidcIssuer> oidc;
    LdapOptions ldap;
    // Where key sets fetched from issuers are kept across restarts (storage/layout.hpp); set by
    // the node, not configured.
    std::string issuer_keys_dir;
    std::map<std::string, std::vector<std::string>> groups;
    std::vector<Rule> rules;

    bool enabled() const {
        return !htpasswd_file.empty() || !token_signing_key_file.empty() || !token_verify_key_files.empty() ||
               !oidc.empty() || ldap.enabled();
    }
    bool tokens() const { return !token_signing_key_file.empty() || !token_verify_key_files.empty(); }
};

}  // namespace berth::auth
