#include "berth/auth/authorizer.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <ctime>
#include <mutex>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "berth/net/host_port.hpp"
#include "berth/oci/encoding.hpp"
#include "berth/oci/names.hpp"
#include "htpasswd.hpp"
#include "issuers.hpp"
#include "jwt.hpp"
#include "ldap.hpp"
#include "rules.hpp"

namespace berth::auth {

using nlohmann::json;

namespace {

const char* action_name(Action action) {
    switch (action) {
        case Action::pull: return "pull";
        case Action::push: return "push";
        case Action::del: return "delete";
    }
    return "pull";
}

struct Credentials {
    enum class Kind { none, basic, bearer, malformed } kind = Kind::none;
    std::string user, password, token;
};

Credentials parse_authorization(std::string_view header) {
    Credentials out;
    if (header.empty()) return out;
    auto space = header.find(' ');
    auto scheme = header.substr(0, space);
    auto value = space == std::string_view::npos ? std::string_view{} : header.substr(space + 1);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    auto is = [&](const char* name) {
        return scheme.size() == std::strlen(name) && std::equal(scheme.begin(), scheme.end(), name, [](char a, char b) {
                   return std::tolower(a) == std::tolower(b);
               });
    };
    out.kind = Credentials::Kind::malformed;
    if (is("basic")) {
        auto decoded = oci::base64_decode(value);
        if (!decoded) return out;
        auto colon = decoded->find(':');
        if (colon == std::string::npos) return out;
        out.kind = Credentials::Kind::basic;
        out.user = decoded->substr(0, colon);
        out.password = decoded->substr(colon + 1);
    } else if (is("bearer") && !value.empty()) {
        out.kind = Credentials::Kind::bearer;
        out.token = std::string(value);
    }
    return out;
}

}  // namespace

std::optional<Action> parse_action(std::string_view text) {
    if (text == "pull") return Action::pull;
    if (text == "push") return Action::push;
    if (text == "delete") return Action::del;
    return std::nullopt;
}

TokenAccess access_of(const json& claims) {
    TokenAccess out;
    auto access = claims.find("access");
    if (access == claims.end() || !access->is_array()) return out;
    for (auto& entry : *access) {
        if (!entry.is_object()) continue;
        TokenAccess::Entry granted{entry.value("type", std::string()), entry.value("name", std::string()), {}};
        if (auto actions = entry.find("actions"); actions != entry.end() && actions->is_array())
            for (auto& action : *actions)
                if (action.is_string()) granted.actions.push_back(action.get<std::string>());
        out.entries.push_back(std::move(granted));
    }
    return out;
}

bool TokenAccess::grants(const Need& need) const {
    for (auto& entry : entries) {
        auto has = [&](const char* action) {
            return std::any_of(entry.actions.begin(), entry.actions.end(),
                               [&](auto& a) { return a == action || a == "*"; });
        };
        if (need.catalog
                ? (entry.type == "registry" && entry.name == "catalog" && has("*"))
                : (entry.type == "repository" && entry.name == need.repository && has(action_name(need.action))))
            return true;
    }
    return false;
}

// Who a token this registry issued was issued to: its subject, with the groups and namespace
// an issuer's token gave it (the catalog is filtered by them).
Principal principal_of(const json& claims) {
    Principal principal{claims.value("sub", std::string()), {}, claims.value("namespace", std::string())};
    if (auto groups = claims.find("groups"); groups != claims.end() && groups->is_array())
        for (auto& group : *groups)
            if (group.is_string()) principal.groups.push_back(group.get<std::string>());
    return principal;
}

// A password that is a JWT (three base64url parts) is tried as a token first:
// docker login, podman login and kubelet credential providers send a service
// account token as the password of Basic credentials.
bool looks_like_jwt(std::string_view text) {
    return text.size() > 16 && std::count(text.begin(), text.end(), '.') == 2 &&
           text.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.") ==
               std::string_view::npos;
}

// How credentials were checked, for berth_auth_logins_total.
enum class LoginMethod { htpasswd, token, oidc, ldap };
constexpr const char* login_method_names[] = {"htpasswd", "token", "oidc", "ldap"};
enum class LoginResult { ok, refused, unavailable };
constexpr const char* login_result_names[] = {"ok", "refused", "unavailable"};

// Basic credentials checked: who they stand for, or how to refuse them.
struct Login {
    std::optional<Principal> principal;
    int status = 401;  // 429 for a user throttled, 503 when the directory cannot be asked
    std::string message = "invalid username or password";
    std::optional<std::int64_t> expires;  // a token given as the password: its exp
};

struct Authorizer::Impl {
    Options options;
    mutable std::atomic<std::uint64_t> logins[std::size(login_method_names)][std::size(login_result_names)] = {};

    void count(LoginMethod method, bool ok) const { count(method, ok ? LoginResult::ok : LoginResult::refused); }
    void count(LoginMethod method, LoginResult result) const {
        ++logins[static_cast<std::size_t>(method)][static_cast<std::size_t>(result)];
    }
    std::unique_ptr<Htpasswd> htpasswd;
    std::unique_ptr<LdapDirectory> ldap;
    std::unique_ptr<TrustedIssuers> issuers;
    std::shared_ptr<JwtKey> signing_key;
    std::vector<std::shared_ptr<JwtKey>> verify_keys;  // token.verify_keys: other token servers'

    struct Verified {
        json claims;
        long long expires;
        bool issued_here;  // signed with signing_key, by this registry's token endpoint
    };
    // Verified tokens, so each is checked cryptographically once.
    mutable std::mutex cache_mutex;
    mutable std::unordered_map<std::string, Verified> verified;

    bool takes_tokens() const { return signing_key || !verify_keys.empty(); }

    std::optional<Verified> claims_of(const std::string& token) const {
        const auto now = std::chrono::system_clock::now();
        const auto now_s = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
        {
            std::lock_guard lock(cache_mutex);
            auto it = verified.find(token);
            if (it != verified.end()) {
                if (it->second.expires >= now_s) return it->second;
                verified.erase(it);
                return std::nullopt;
            }
        }
        std::string error;
        const TokenCheck check{options.token_issuer, {options.token_service}, now};
        std::optional<json> claims;
        const bool issued_here = signing_key && (claims = verify_jwt(token, {signing_key}, check, error));
        if (!issued_here && !verify_keys.empty()) claims = verify_jwt(token, verify_keys, check, error);
        if (!claims) return std::nullopt;
        Verified out{std::move(*claims), 0, issued_here};
        out.expires = out.claims["exp"].get<long long>();
        std::lock_guard lock(cache_mutex);
        if (verified.size() > 10000) verified.clear();
        verified[token] = out;
        return out;
    }

    bool rules_grant(const Principal& principal, const Need& need) const {
        if (need.catalog) return !principal.anonymous();
        return allowed_actions(options, principal, need.repository).count(need.action) > 0;
    }

    // Who Basic credentials stand for: a trusted issuer's token given as the password, an
    // htpasswd user, or a directory's user.
    Login login(const std::string& user, const std::string& password) const {
        const bool token = issuers && looks_like_jwt(password);
        if (token) {
            std::string error;
            if (auto identity = issuers->verify(password, error)) {
                count(LoginMethod::oidc, true);
                return {std::move(identity->principal), 200, {}, identity->expires};
            }
        }
        if (htpasswd && htpasswd->verify(user, password)) {
            count(LoginMethod::htpasswd, true);
            return {Principal{user, {}, {}}, 200, {}, std::nullopt};
        }
        if (ldap && !token) return directory_login(user, password);
        count(token ? LoginMethod::oidc : LoginMethod::htpasswd, false);
        return {};
    }

    // The directory names the principal (ldap.hpp): its prefix, the name as the directory matches it.
    Login directory_login(const std::string& user, const std::string& password) const {
        auto answer = ldap->login(user, password);
        using Result = DirectoryLogin::Result;
        if (answer.result == Result::ok) {
            count(LoginMethod::ldap, LoginResult::ok);
            return {Principal{std::move(answer.principal), std::move(answer.groups), {}}, 200, {}, std::nullopt};
        }
        const bool down = answer.result == Result::unavailable;
        count(LoginMethod::ldap, down ? LoginResult::unavailable : LoginResult::refused);
        return {std::nullopt,
                down                                 ? 503
                : answer.result == Result::throttled ? 429
                                                     : 401,
                answer.message, std::nullopt};
    }

    std::string challenge(const std::vector<Need>& needs, std::string_view host, bool secure, bool insufficient) const {
        if (!options.tokens()) return "Basic realm=\"berth\"";
        std::string realm = options.token_realm;
        if (realm.empty())
            realm = std::string(secure ? "https://" : "http://") +
                    std::string(net::plain_host(host) ? host : "localhost") + "/auth/token";
        std::string out = "Bearer realm=\"" + realm + "\",service=\"" + options.token_service + "\"";
        std::string scope;
        for (auto& need : needs) {
            if (!scope.empty()) scope += ' ';
            if (need.catalog) scope += "registry:catalog:*";
            else {
                scope += "repository:" + need.repository + ":" + action_name(need.action);
                if (need.action == Action::push) scope += ",pull";
            }
        }
        if (!scope.empty()) out += ",scope=\"" + scope + "\"";
        if (insufficient) out += ",error=\"insufficient_scope\"";
        return out;
    }
};

Authorizer::Authorizer(Options options) : impl_(std::make_unique<Impl>()) {
    impl_->options = std::move(options);
    auto& o = impl_->options;
    if (!o.htpasswd_file.empty()) impl_->htpasswd = std::make_unique<Htpasswd>(o.htpasswd_file);
    if (!o.token_signing_key_file.empty()) {
        impl_->signing_key = JwtKey::load_private(o.token_signing_key_file);
    }
    for (auto& file : o.token_verify_key_files) impl_->verify_keys.push_back(JwtKey::load_public(file));
    if (!o.oidc.empty()) impl_->issuers = std::make_unique<TrustedIssuers>(o.oidc, o.issuer_keys_dir);
    if (o.ldap.enabled()) impl_->ldap = std::make_unique<LdapDirectory>(o.ldap);
}

Authorizer::~Authorizer() = default;

bool Authorizer::enabled() const { return impl_->options.enabled(); }
bool Authorizer::issues_tokens() const { return impl_->signing_key != nullptr; }

void Authorizer::refresh_keys() {
    if (impl_->issuers) impl_->issuers->refresh();
}

void Authorizer::write_metrics(observe::MetricsWriter& out) const {
    for (std::size_t method = 0; method < std::size(login_method_names); ++method)
        for (std::size_t result = 0; result < std::size(login_result_names); ++result)
            out.add(observe::Metric::auth_logins_total,
                    {{"method", login_method_names[method]}, {"result", login_result_names[result]}},
                    static_cast<double>(impl_->logins[method][result]));
    if (impl_->issuers) impl_->issuers->write_metrics(out);
}

Decision Authorizer::check(std::string_view authorization, const std::vector<Need>& needs, std::string_view host,
                           bool secure) const {
    Decision decision;
    if (!enabled()) {
        decision.allowed = true;
        return decision;
    }
    auto credentials = parse_authorization(authorization);
    auto refuse = [&](int status, std::string message, bool insufficient = false) {
        decision.status = status;
        decision.message = std::move(message);
        if (status == 401) decision.challenge = impl_->challenge(needs, host, secure, insufficient);
        return decision;
    };
    using Kind = Credentials::Kind;
    if (credentials.kind == Kind::malformed) return refuse(401, "malformed Authorization header");
    if (credentials.kind == Kind::basic) {
        auto login = impl_->login(credentials.user, credentials.password);
        if (!login.principal) return refuse(login.status, std::move(login.message));
        decision.principal = std::move(*login.principal);
        decision.expires = login.expires;
    }
    std::optional<Impl::Verified> verified;
    if (credentials.kind == Kind::bearer) {
        if (!impl_->takes_tokens() && !impl_->issuers) return refuse(401, "bearer tokens are not accepted here");
        // This registry's own tokens carry their access; an issuer's token is an identity the rules judge.
        // A trusted issuer's token is not tried against this registry's own keys first: that
        // failed signature check would repeat on every request it makes.
        const auto peeked = peek_jwt(credentials.token);
        const bool foreign = impl_->issuers && peeked && peeked->issuer != impl_->options.token_issuer;
        if (impl_->takes_tokens() && !foreign) verified = impl_->claims_of(credentials.token);
        if (verified) {
            impl_->count(LoginMethod::token, true);
            decision.principal = principal_of(verified->claims);
            decision.token = access_of(verified->claims);
            decision.token->issued_here = verified->issued_here;
            decision.expires = verified->expires;
        } else {
            std::string error = "invalid or expired token";
            auto identity = impl_->issuers ? impl_->issuers->verify(credentials.token, error) : std::nullopt;
            impl_->count(impl_->issuers ? LoginMethod::oidc : LoginMethod::token, identity.has_value());
            if (!identity) return refuse(401, error);
            decision.principal = std::move(identity->principal);
            decision.expires = identity->expires;
        }
    }
    for (auto& need : needs) {
        bool granted = decision.token ? decision.token->grants(need) : impl_->rules_grant(decision.principal, need);
        if (granted) continue;
        if (verified) return refuse(401, "token does not grant this access", true);
        if (decision.principal.anonymous()) return refuse(401, "authentication required");
        return refuse(403, "access denied");
    }
    if (needs.empty() && decision.principal.anonymous() && !verified)
        return refuse(401, "authentication required");  // GET /v2/ tells clients to sign in
    decision.allowed = true;
    return decision;
}

bool Authorizer::may_pull(const Decision& caller, const std::string& repository) const {
    if (!enabled()) return true;
    const Need need{repository, Action::pull, false};
    return caller.token ? caller.token->grants(need) : impl_->rules_grant(caller.principal, need);
}

bool Authorizer::is_one_of(const Decision& caller, const std::vector<std::string>& selectors) const {
    if (!enabled()) return true;
    // A token with an access list may do what it lists and nothing else: no list names this.
    if (caller.token) return false;
    return std::any_of(selectors.begin(), selectors.end(),
                       [&](const std::string& selector) { return member(impl_->options, caller.principal, selector); });
}

bool Authorizer::may_list(const Decision& caller, const std::string& repository) const {
    if (may_pull(caller, repository)) return true;
    // This registry's token endpoint granted the catalog from these rules; another token server's
    // subject is no principal here, its access list all it has.
    return caller.token && caller.token->issued_here &&
           impl_->rules_grant(caller.principal, {repository, Action::pull, false});
}

bool Authorizer::uses_directory() const { return impl_->ldap != nullptr; }

// htpasswd names hold no ':' and no other source gives a bare name beside htpasswd (the prefixes
// are checked at start), so a name without ':' is an htpasswd user's.
std::string Authorizer::credential_generation(const Principal& principal) const {
    if (!impl_->htpasswd || principal.name.find(':') != std::string::npos) return {};
    return impl_->htpasswd->generation(principal.name);
}

bool Authorizer::credential_current(const Principal& principal, const std::string& generation) const {
    if (!impl_->htpasswd || principal.name.find(':') != std::string::npos) return true;
    const auto now = impl_->htpasswd->generation(principal.name);
    return !now.empty() && now == generation;
}

std::pair<int, std::string> Authorizer::issue_token(std::string_view authorization, const std::string& service,
                                                    const std::vector<std::string>& scopes) const {
    auto error = [](int status, const char* code, const char* message) {
        return std::pair{status, json{{"errors", {{{"code", code}, {"message", message}}}}}.dump()};
    };
    if (!impl_->signing_key) return error(404, "UNSUPPORTED", "this registry issues no tokens");
    if (!service.empty() && service != impl_->options.token_service)
        return error(400, "UNSUPPORTED", "unknown service");
    auto credentials = parse_authorization(authorization);
    Principal principal;
    if (credentials.kind == Credentials::Kind::basic) {
        auto login = impl_->login(credentials.user, credentials.password);
        if (login.status == 503) return error(503, "UNAVAILABLE", login.message.c_str());
        if (login.status == 429) return error(429, "TOOMANYREQUESTS", login.message.c_str());
        if (!login.principal) return error(401, "UNAUTHORIZED", login.message.c_str());
        principal = std::move(*login.principal);
    } else if (credentials.kind != Credentials::Kind::none) {
        return error(401, "UNAUTHORIZED", "token requests take Basic credentials");
    }

    json access = json::array();
    for (auto& scope : scopes) {
        // repository:NAME:ACTIONS (NAME has no ':'), registry:catalog:*
        auto first = scope.find(':'), last = scope.rfind(':');
        if (first == std::string::npos || first == last) continue;
        auto type = scope.substr(0, first), name = scope.substr(first + 1, last - first - 1);
        json granted = json::array();
        std::string actions = scope.substr(last + 1) + ",";
        for (std::size_t start = 0, comma; (comma = actions.find(',', start)) != std::string::npos; start = comma + 1) {
            auto action = actions.substr(start, comma - start);
            if (type == "registry" && name == "catalog" && action == "*" && !principal.anonymous())
                granted.push_back("*");
            if (type != "repository" || !oci::valid_repository_name(name)) continue;
            auto allowed = allowed_actions(impl_->options, principal, name);
            for (auto candidate : {Action::pull, Action::push, Action::del})
                if ((action == "*" || action == action_name(candidate)) && allowed.count(candidate) &&
                    std::find(granted.begin(), granted.end(), action_name(candidate)) == granted.end())
                    granted.push_back(action_name(candidate));
        }
        if (!granted.empty()) access.push_back({{"type", type}, {"name", name}, {"actions", granted}});
    }

    using namespace std::chrono;
    const auto now = duration_cast<seconds>(system_clock::now().time_since_epoch()).count();
    json claims = {{"iss", impl_->options.token_issuer},
                   {"sub", principal.name},
                   {"aud", impl_->options.token_service},
                   {"iat", now},
                   {"nbf", now - 1},
                   {"exp", now + impl_->options.token_ttl.count()},
                   {"jti", oci::base64url(oci::random_bytes(12))},
                   {"access", access}};
    if (!principal.groups.empty()) claims["groups"] = principal.groups;
    if (!principal.ns.empty()) claims["namespace"] = principal.ns;
    auto token = sign_jwt(*impl_->signing_key, claims);
    std::time_t issued = now;
    char issued_at[32];
    std::strftime(issued_at, sizeof issued_at, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&issued));
    return {200, json{{"token", token},
                      {"access_token", token},
                      {"expires_in", impl_->options.token_ttl.count()},
                      {"issued_at", issued_at}}
                     .dump()};
}

}  // namespace berth::auth
