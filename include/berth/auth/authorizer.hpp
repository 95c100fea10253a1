#pragma once
// Authentication (htpasswd Basic, Bearer JWTs) and per-repository
// authorization. It sees headers as strings, never HTTP framing.
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "berth/auth/options.hpp"
#include "berth/observe/metrics.hpp"

namespace berth::auth {

struct Principal {
    std::string name;                 // empty for anonymous
    std::vector<std::string> groups;  // from a token's groups claim, beside auth.groups
    std::string ns;                   // a Kubernetes service account's namespace: ${namespace} in rules
    bool anonymous() const { return name.empty(); }
};

// One thing a request needs, e.g. pull on "team/app".
struct Need {
    std::string repository;  // "" with catalog
    Action action = Action::pull;
    bool catalog = false;
};

// A token's own access list (berth's tokens, token.verify_keys issuers'): a request that presents
// one may do what it lists and nothing else, whatever the rules would let its subject do.
struct TokenAccess {
    struct Entry {
        std::string type, name;
        std::vector<std::string> actions;
    };
    std::vector<Entry> entries;
    bool issued_here = false;  // by this registry's token endpoint (auth.token.signing_key)
    bool grants(const Need& need) const;
};

struct Decision {
    bool allowed = false;
    int status = 200;       // when refused: 401, 403, 429 (a user throttled), 503 (a directory down)
    std::string challenge;  // WWW-Authenticate value for a 401
    std::string message;
    Principal principal;
    std::optional<TokenAccess> token;     // the access list of the token presented, if it carries one
    std::optional<std::int64_t> expires;  // when the credential presented stops being valid (Unix seconds)
};

class Authorizer {
public:
    explicit Authorizer(Options options);
    ~Authorizer();

    bool enabled() const;
    // authorization: the Authorization header; host: the Host header (for the realm);
    // secure: whether the request came over TLS.
    Decision check(std::string_view authorization, const std::vector<Need>& needs, std::string_view host,
                   bool secure) const;
    // May a caller, as check() found it, pull from repository? By its token's access list when it
    // has one, else by the rules.
    bool may_pull(const Decision& caller, const std::string& repository) const;
    // May a listing behind the registry:catalog:* grant (the catalog, usage) name repository to
    // the caller? What it may pull, and for a token of this registry's own endpoint also what the
    // rules give its subject (the grant is to list those); another token server's token lists
    // what its access list grants.
    bool may_list(const Decision& caller, const std::string& repository) const;
    // Whether the caller is one of the principals selectors name (as rules name them); true with
    // authentication off. Never for a caller presenting a token with an access list (it may do
    // only what the list says, which names repositories).
    bool is_one_of(const Decision& caller, const std::vector<std::string>& selectors) const;
    // Whether a Basic login may ask a directory (auth.ldap): such logins wait on the ldap party.
    bool uses_directory() const;
    // What a web UI session remembers of the credential it came from, and whether that still
    // holds: an htpasswd user's entry (removed, or a new password, ends the session); "" and
    // always for other sources, whose sessions end with their lifetime or the token's.
    std::string credential_generation(const Principal& principal) const;
    bool credential_current(const Principal& principal, const std::string& generation) const;

    // The built-in token endpoint: GET /auth/token?service=&scope=...; returns
    // the status and JSON body.
    std::pair<int, std::string> issue_token(std::string_view authorization, const std::string& service,
                                            const std::vector<std::string>& scopes) const;
    bool issues_tokens() const;
    // Reads trusted issuers' key sets again (auth.oidc); a set that cannot be read keeps the last good one.
    void refresh_keys();
    // Logins by method and result, and issuers' key refreshes.
    void write_metrics(observe::MetricsWriter& out) const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

std::optional<Action> parse_action(std::string_view text);

}  // namespace berth::auth
