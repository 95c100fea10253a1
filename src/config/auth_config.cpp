#include "berth/auth/authorizer.hpp"
#include "section.hpp"

namespace berth::config {
namespace {

void read_auth_rules(const json& rules, auth::Options& a) {
    for (std::size_t i = 0; i < rules.size(); ++i) {
        Section r(rules[i], "auth.rules[" + std::to_string(i) + "]");
        auth::Rule rule;
        std::vector<std::string> actions;
        r.string("repository", rule.repository, false);
        r.strings("principals", rule.principals);
        r.strings("actions", actions);
        r.finish();
        if (rule.repository.empty() || rule.principals.empty() || actions.empty())
            throw ConfigError("auth.rules[" + std::to_string(i) + "] needs repository, principals and actions");
        for (auto& p : rule.principals)
            if (!(p == "anonymous" || p == "authenticated" || p.starts_with("user:") || p.starts_with("group:")))
                throw ConfigError("auth.rules[" + std::to_string(i) + "].principals: \"" + p +
                                  "\" is not user:NAME, group:NAME, authenticated or anonymous");
        for (auto& name : actions) {
            auto action = auth::parse_action(name);
            if (!action)
                throw ConfigError("auth.rules[" + std::to_string(i) + "].actions: \"" + name +
                                  "\" is not pull, push or delete");
            rule.actions.push_back(*action);
        }
        a.rules.push_back(std::move(rule));
    }
}

void read_auth_oidc(const json& issuers, Reading& r) {
    for (std::size_t i = 0; i < issuers.size(); ++i) {
        const auto where = "auth.oidc[" + std::to_string(i) + "]";
        Section s(issuers[i], where);
        auth::OidcIssuer issuer;
        s.string("issuer", issuer.issuer, false);
        s.strings("audiences", issuer.audiences);
        s.string("jwks_file", issuer.jwks_file, false);
        s.string("discovery_url", issuer.discovery_url, false);
        s.string("ca_file", issuer.ca_file, false);
        s.string("bearer_token_file", issuer.bearer_token_file, false);
        s.string("username_claim", issuer.username_claim, false);
        s.string("groups_claim", issuer.groups_claim, false);
        s.seconds("max_token_lifetime_seconds", issuer.max_token_lifetime);
        s.boolean("service_accounts", issuer.service_accounts);
        s.string("username_prefix", issuer.username_prefix);
        s.string("groups_prefix", issuer.groups_prefix);
        s.finish();
        if (issuer.issuer.empty() || issuer.audiences.empty()) throw ConfigError(where + " needs issuer and audiences");
        if (issuer.jwks_file.empty() == issuer.discovery_url.empty())
            throw ConfigError(where + " needs jwks_file or discovery_url, one of them");
        if (!issuer.discovery_url.empty()) check_url(where + ".discovery_url", issuer.discovery_url);
        for (auto* file : {&issuer.jwks_file, &issuer.ca_file, &issuer.bearer_token_file})
            if (!file->empty()) *file = r.path_of(*file);
        for (auto& other : r.config.auth.oidc)
            if (other.issuer == issuer.issuer)
                throw ConfigError(where + ".issuer: \"" + issuer.issuer + "\" is listed twice");
        r.config.auth.oidc.push_back(std::move(issuer));
    }
}

void check_ldap_filter(const std::string& key, const std::string& filter, const char* placeholder) {
    if (filter.size() < 3 || filter.front() != '(' || filter.back() != ')' ||
        filter.find(placeholder) == std::string::npos)
        throw ConfigError(key + " must be an LDAP filter in parentheses holding " + placeholder);
}

void read_auth_ldap(Section& s, Reading& r) {
    auto& l = r.config.auth.ldap;
    std::string password_file;
    s.string("url", l.url, false);
    s.string("ca_file", l.ca_file, false);
    s.string("bind_dn", l.bind_dn, false);
    s.string("bind_password_file", password_file, false);
    s.string("user_search_base", l.user_search_base, false);
    s.string("user_filter", l.user_filter, false);
    s.string("group_search_base", l.group_search_base, false);
    s.string("group_filter", l.group_filter, false);
    s.seconds("timeout_seconds", l.timeout);
    s.seconds("cache_seconds", l.cache_seconds);
    s.string("username_prefix", l.username_prefix);
    s.string("groups_prefix", l.groups_prefix);
    if (!l.url.starts_with("ldaps://") && !l.url.starts_with("ldap://"))
        throw ConfigError("auth.ldap.url must be ldaps://HOST[:PORT] or ldap://HOST[:PORT] (with StartTLS)");
    if (l.user_search_base.empty()) throw ConfigError("auth.ldap.user_search_base is required");
    check_ldap_filter("auth.ldap.user_filter", l.user_filter, "{username}");
    if (!l.group_search_base.empty()) check_ldap_filter("auth.ldap.group_filter", l.group_filter, "{dn}");
    if (l.bind_dn.empty() != password_file.empty())
        throw ConfigError("auth.ldap: bind_dn and bind_password_file go together");
    if (!password_file.empty()) l.bind_password = secret_from("auth.ldap.bind_password_file", r.path_of(password_file));
    if (!l.ca_file.empty()) l.ca_file = readable_file("auth.ldap.ca_file", r.path_of(l.ca_file));
    if (l.timeout.count() < 1 || l.timeout.count() > 60)
        throw ConfigError("auth.ldap.timeout_seconds must be from 1 to 60");
    if (l.cache_seconds.count() > 3600) throw ConfigError("auth.ldap.cache_seconds must be at most 3600");
}

// Names of different sources must never meet (docs/auth.md). A source's names are its prefix and
// what follows; htpasswd and directory names hold no ':' (Basic credentials cannot carry one). Two
// sources collide when one's prefix begins the other's, unless the first's names cannot hold the
// ':' the rest of the longer prefix has.
struct NameSource {
    std::string key, prefix;
    bool colon_free;
};

void check_sources_apart(const std::vector<NameSource>& sources, const char* what) {
    for (auto& a : sources)
        for (auto& b : sources) {
            if (&a == &b || !b.prefix.starts_with(a.prefix)) continue;
            const bool safe = a.prefix.size() < b.prefix.size() && a.colon_free &&
                              b.prefix.find(':', a.prefix.size()) != std::string::npos;
            if (!safe)
                throw ConfigError(b.key + ": the " + what + " \"" + b.prefix + "\" can meet " + a.key + "'s (\"" +
                                  a.prefix + "\"): give each source a prefix of its own");
        }
}

void check_prefixes(const auth::Options& a) {
    std::vector<NameSource> users, groups;
    if (!a.htpasswd_file.empty()) users.push_back({"auth.htpasswd", "", true});
    if (a.ldap.enabled()) {
        users.push_back({"auth.ldap.username_prefix", a.ldap.username_prefix, true});
        groups.push_back({"auth.ldap.groups_prefix", a.ldap.groups_prefix, false});
    }
    for (std::size_t i = 0; i < a.oidc.size(); ++i) {
        const auto where = "auth.oidc[" + std::to_string(i) + "]";
        // A service account issuer's names all begin system:serviceaccount:, its groups system:serviceaccounts.
        const auto& issuer = a.oidc[i];
        users.push_back({where + ".username_prefix",
                         issuer.user_prefix() + (issuer.service_accounts ? "system:serviceaccount:" : ""), false});
        groups.push_back({where + ".groups_prefix",
                          issuer.group_prefix() + (issuer.service_accounts ? "system:serviceaccounts" : ""), false});
    }
    check_sources_apart(users, "username prefix");
    check_sources_apart(groups, "groups prefix");
}

}  // namespace

void read_auth(Section& s, Reading& r) {
    auto& a = r.config.auth;
    s.string("htpasswd", a.htpasswd_file);
    if (!a.htpasswd_file.empty()) a.htpasswd_file = r.path_of(a.htpasswd_file);
    s.section("token", [&](Section& t) {
        t.string("signing_key", a.token_signing_key_file);
        if (!a.token_signing_key_file.empty()) a.token_signing_key_file = r.path_of(a.token_signing_key_file);
        t.strings("verify_keys", a.token_verify_key_files);
        for (auto& file : a.token_verify_key_files) file = r.path_of(file);
        t.string("issuer", a.token_issuer, false);
        t.string("service", a.token_service, false);
        t.string("realm", a.token_realm);
        t.seconds("ttl_seconds", a.token_ttl);
    });
    if (auto* groups = s.object("groups")) {
        for (auto& [name, members] : groups->items()) {
            if (!members.is_array()) throw ConfigError("auth.groups." + name + " must be an array of user names");
            for (auto& member : members) {
                if (!member.is_string()) throw ConfigError("auth.groups." + name + " must be an array of user names");
                a.groups[name].push_back(member.get<std::string>());
            }
        }
    }
    if (auto* rules = s.array("rules")) read_auth_rules(*rules, r.config.auth);
    if (auto* issuers = s.array("oidc")) read_auth_oidc(*issuers, r);
    s.section("ldap", [&](Section& l) { read_auth_ldap(l, r); });
    check_prefixes(a);
}

}  // namespace berth::config
