#include <catch2/catch.hpp>

#include "berth/config/config.hpp"

using namespace berth::config;

namespace {
std::string error_of(const std::string& text) {
    try {
        parse_config(text);
    } catch (const ConfigError& error) {
        return error.what();
    }
    return "";
}
}  // namespace

TEST_CASE("configuration is read with its defaults") {
    auto config = parse_config(R"({"listen":"0.0.0.0:6000","root":"/srv","limits":{"max_uploads":7},"deletes":false})");
    CHECK(config.server.host == "0.0.0.0");
    CHECK(config.server.port == 6000);
    CHECK(config.root == "/srv");
    CHECK(config.registry.max_uploads == 7);
    CHECK_FALSE(config.registry.deletes_enabled);
    CHECK(config.registry.max_manifest_bytes == 4u << 20);
    CHECK(parse_config("{}").server.port == 5000);
    CHECK(parse_config("{}").server.same_host_congestion == "reno");
    CHECK(parse_config(R"({"tcp":{"same_host_congestion_control":""}})").server.same_host_congestion.empty());
}

TEST_CASE("configuration errors name the key and what was expected") {
    CHECK(error_of(R"({"lisen":"x"})") == "unknown key lisen");
    CHECK(error_of(R"({"limits":{"bogus":1}})") == "unknown key limits.bogus");
    CHECK(error_of(R"({"limits":{"max_uploads":"7"}})").find("limits.max_uploads must be a whole number") == 0);
    CHECK(error_of(R"({"limits":{"max_uploads":-1}})").find("limits.max_uploads") == 0);
    CHECK(error_of(R"({"deletes":"yes"})") == "deletes must be true or false");
    CHECK(error_of(R"({"limits":[]})") == "limits must be an object");
    CHECK(error_of("not json") == "the configuration is not valid JSON");
    CHECK(error_of(R"({"listen":"nohost"})").find("listen: ") == 0);
    CHECK(error_of(R"({"listen":"h:99999"})").find("listen: ") == 0);
    CHECK(error_of(R"({"tcp":{"same_host_congestion_control":"Reno; rm"}})").find("tcp.same_host_congestion_control") ==
          0);
    CHECK(error_of(R"({"tcp":{"same_host_congestion_control":"a_name_of_16chrs"}})").find("tcp.same_host") == 0);
    CHECK(error_of(R"({"tls":{"kernel_tls":"yes"}})") == "tls.kernel_tls must be true or false");
    CHECK(error_of(R"({"sparse_manifests":"cache/**"})") == "sparse_manifests must be an array of strings");
    CHECK(error_of(R"({"sparse_manifests":["Cache/*"]})").find("sparse_manifests: \"Cache/*\"") == 0);
}

TEST_CASE("listen accepts IPv6 in brackets") {
    Config config;
    apply_listen(config, "[::1]:5001");
    CHECK(config.server.host == "::1");
    CHECK(config.server.port == 5001);
    apply_listen(config, ":5002");
    CHECK(config.server.host == "0.0.0.0");
    CHECK(config.server.port == 5002);
    apply_listen(config, "127.0.0.1:0");  // the kernel picks
    CHECK(config.server.port == 0);
    CHECK_THROWS_AS(apply_listen(config, "::1:5001"), ConfigError);
    CHECK_THROWS_AS(apply_listen(config, "host"), ConfigError);
}

TEST_CASE("change-log retention and the metadata cache budget are checked at start-up") {
    auto config = parse_config(
        R"({"replication":{"log_retention_seconds":60,"log_max_entries":5000},"cache":{"memory_bytes":1048576}})");
    CHECK(config.replication.log_retention.window == std::chrono::seconds(60));
    CHECK(config.replication.log_retention.max_entries == 5000);
    CHECK(config.metadata_cache_bytes == 1048576);
    CHECK(parse_config("{}").replication.log_retention.window == std::chrono::seconds(3600));
    CHECK(parse_config("{}").metadata_cache_bytes == berth::storage::MetaStore::default_cache_bytes);
    CHECK(error_of(R"({"replication":{"log_max_entries":999}})") ==
          "replication.log_max_entries must be at least 1000");
    CHECK(error_of(R"({"replication":{"log_retention_seconds":-1}})").find("replication.log_retention_seconds") == 0);
    CHECK(error_of(R"({"replication":{"log_retention":60}})") == "unknown key replication.log_retention");
    CHECK(error_of(R"({"cache":{"memory_bytes":"64M"}})").find("cache.memory_bytes must be a whole number") == 0);
}

TEST_CASE("retention policies are read with days or seconds", "[retention]") {
    auto config = parse_config(R"({"retention":{"interval_seconds":60,"policies":[
        {"name":"ci","repositories":["ci/**"],"keep_last":10,"keep_tags":["v*"],"expire_tags":["pr-*"],
         "expire_unpulled_days":1.5,"delete_untagged_after_seconds":90},
        {"repositories":["**"],"delete_untagged_after_days":7}]}})");
    REQUIRE(config.retention.policies.size() == 2);
    CHECK(config.retention.interval == std::chrono::seconds(60));
    auto& ci = config.retention.policies[0];
    CHECK(ci.name == "ci");
    CHECK(ci.keep_last == 10);
    CHECK(ci.keep_tags == std::vector<std::string>{"v*"});
    CHECK(ci.expire_tags == std::vector<std::string>{"pr-*"});
    CHECK(ci.expire_unpulled == std::chrono::seconds(129600));
    CHECK(ci.untagged_after == std::chrono::seconds(90));
    auto& rest = config.retention.policies[1];
    CHECK(rest.name == "retention.policies[1]");
    CHECK_FALSE(rest.expire_unpulled);
    CHECK(rest.untagged_after == std::chrono::seconds(7 * 86400));
    CHECK(parse_config("{}").retention.policies.empty());
    CHECK(parse_config("{}").retention.interval == std::chrono::seconds(3600));
}

TEST_CASE("retention policies are checked strictly", "[retention]") {
    auto policy = [](const std::string& body) { return error_of(R"({"retention":{"policies":[)" + body + "]}}"); };
    const std::string where = "retention.policies[0]";
    CHECK(error_of(R"({"retention":{"bogus":1}})") == "unknown key retention.bogus");
    CHECK(error_of(R"({"retention":{"policies":{}}})") == "retention.policies must be an array");
    CHECK(policy(R"({"repositories":["a"],"keep_last":3,"extra":1})") == "unknown key " + where + ".extra");
    CHECK(policy(R"({"keep_last":3})") == where + ".repositories must list repository globs");
    CHECK(policy(R"({"repositories":["A/*"],"keep_last":3})").find(where + ".repositories: \"A/*\"") == 0);
    CHECK(policy(R"({"repositories":["a"]})").find(where + " has no rule") == 0);
    CHECK(policy(R"({"repositories":["a"],"keep_tags":["v*"]})").find(where + " has no rule") == 0);
    CHECK(policy(R"({"repositories":["a"],"keep_tags":["v*"],"delete_untagged_after_days":1})")
              .find(where + ".keep_tags only keeps") == 0);
    CHECK(policy(R"({"repositories":["a"],"keep_last":0})") == where + ".keep_last must be at least 1");
    CHECK(policy(R"({"repositories":["a"],"keep_last":-2})").find(where + ".keep_last must be a whole number") == 0);
    CHECK(policy(R"({"repositories":["a"],"keep_last":"2"})").find(where + ".keep_last must be a whole number") == 0);
    CHECK(policy(R"({"repositories":["a"],"expire_unpulled_days":-1})") ==
          where + ".expire_unpulled_days must be a number of days from 0 to 36500");
    CHECK(policy(R"({"repositories":["a"],"delete_untagged_after_days":"7"})")
              .find(where + ".delete_untagged_after_days must be a number") == 0);
    CHECK(policy(R"({"repositories":["a"],"expire_unpulled_days":1,"expire_unpulled_seconds":5})") ==
          where + ": give expire_unpulled_days or expire_unpulled_seconds, not both");
    CHECK(policy(R"({"repositories":["a"],"expire_unpulled_seconds":-5})")
              .find(where + ".expire_unpulled_seconds must be a whole number") == 0);
    CHECK(policy(R"({"repositories":["a"],"expire_tags":["pr/*"]})").find(where + ".expire_tags: \"pr/*\"") == 0);
    CHECK(policy(R"({"repositories":["a"],"expire_tags":[""]})") ==
          where + ".expire_tags must be an array of non-empty strings");
    CHECK(policy(R"({"repositories":["a"],"keep_last":1,"keep_tags":["v 1"]})").find(where + ".keep_tags: \"v 1\"") ==
          0);
    CHECK(policy(R"({"repositories":["a"],"keep_last":1,"name":""})") == where + ".name must not be empty");
    CHECK(policy(R"("ci")") == where + " must be an object");
    CHECK(error_of(R"({"agent":{"replicas":["https://berth:5000"]},"retention":{"policies":[)"
                   R"({"repositories":["a"],"keep_last":1}]}})")
              .find("agent and retention.policies exclude each other") == 0);
}

TEST_CASE("quotas are read per namespace glob, in order", "[quotas]") {
    auto config = parse_config(R"({"quotas":[{"namespaces":"team-*","max_bytes":10737418240,"max_repositories":50},
                                             {"namespaces":"ci","max_repositories":3},
                                             {"namespaces":"*"}]})");
    auto& quotas = config.registry.quotas;
    REQUIRE(quotas.size() == 3);
    CHECK(quotas[0].namespaces == "team-*");
    CHECK(quotas[0].max_bytes == 10737418240ull);
    CHECK(quotas[0].max_repositories == 50);
    CHECK(quotas[1].max_bytes == 0);  // no limit
    CHECK(quotas[1].max_repositories == 3);
    CHECK(quotas[2].max_bytes == 0);
    CHECK(quotas[2].max_repositories == 0);
    CHECK(parse_config("{}").registry.quotas.empty());
}

TEST_CASE("quota rules are checked strictly", "[quotas]") {
    CHECK(error_of(R"({"quotas":{}})") == "quotas must be an array");
    CHECK(error_of(R"({"quotas":["team-*"]})") == "quotas[0] must be an object");
    CHECK(error_of(R"({"quotas":[{"namespaces":"a","max_byte":1}]})") == "unknown key quotas[0].max_byte");
    CHECK(error_of(R"({"quotas":[{"max_bytes":1}]})") == "quotas[0].namespaces is required");
    CHECK(error_of(R"({"quotas":[{"namespaces":""}]})") == "quotas[0].namespaces must not be empty");
    CHECK(error_of(R"({"quotas":[{"namespaces":7}]})") == "quotas[0].namespaces must be a string");
    CHECK(error_of(R"({"quotas":[{"namespaces":"a","max_bytes":"1"}]})").find("quotas[0].max_bytes must be a whole") ==
          0);
    CHECK(error_of(R"({"quotas":[{"namespaces":"a","max_bytes":-1}]})").find("quotas[0].max_bytes must be a whole") ==
          0);
    CHECK(error_of(R"({"quotas":[{"namespaces":"a","max_bytes":1.5}]})").find("quotas[0].max_bytes must be a whole") ==
          0);
    CHECK(error_of(R"({"quotas":[{"namespaces":"a","max_bytes":0}]})") ==
          "quotas[0].max_bytes must be at least 1 (leave it out for no limit)");
    CHECK(error_of(R"({"quotas":[{"namespaces":"a","max_repositories":0}]})") ==
          "quotas[0].max_repositories must be at least 1 (leave it out for no limit)");
    CHECK(error_of(R"({"quotas":[{"namespaces":"a","max_repositories":5000000000}]})")
              .find("quotas[0].max_repositories must be a whole") == 0);
    CHECK(error_of(R"({"quotas":[{"namespaces":"team/*"}]})")
              .find("quotas[0].namespaces: \"team/*\" is not a namespace glob") == 0);
    CHECK(error_of(R"({"quotas":[{"namespaces":"Team"}]})").find("is not a namespace glob") != std::string::npos);
    CHECK(error_of(R"({"quotas":[{"namespaces":"[ab]"}]})").find("is not a namespace glob") != std::string::npos);
    CHECK(error_of(R"({"quotas":[{"namespaces":"a","max_bytes":1},{"namespaces":"a","max_bytes":2}]})") ==
          "quotas[1].namespaces: \"a\" is listed twice");
}

TEST_CASE("trusted issuers are read strictly", "[auth]") {
    auto config = parse_config(R"({"auth":{"oidc":[{"issuer":"https://k8s","audiences":["berth"],
        "jwks_file":"/etc/berth/jwks.json","username_claim":"email","max_token_lifetime_seconds":3600}]}})");
    REQUIRE(config.auth.oidc.size() == 1);
    auto& issuer = config.auth.oidc[0];
    CHECK(issuer.issuer == "https://k8s");
    CHECK(issuer.audiences == std::vector<std::string>{"berth"});
    CHECK(issuer.jwks_file == "/etc/berth/jwks.json");
    CHECK(issuer.username_claim == "email");
    CHECK(issuer.groups_claim == "groups");
    CHECK(issuer.max_token_lifetime == std::chrono::seconds(3600));
    CHECK(config.auth.enabled());
    CHECK(error_of(R"({"auth":{"oidc":[{"issuer":"https://k8s","jwks_file":"j"}]}})") ==
          "auth.oidc[0] needs issuer and audiences");
    CHECK(error_of(R"({"auth":{"oidc":[{"issuer":"https://k8s","audiences":["b"]}]}})") ==
          "auth.oidc[0] needs jwks_file or discovery_url, one of them");
    CHECK(error_of(R"({"auth":{"oidc":[{"issuer":"i","audiences":["b"],"discovery_url":"ftp://x"}]}})")
              .find("auth.oidc[0].discovery_url: ") == 0);
    CHECK(error_of(R"({"auth":{"oidc":[{"issuer":"i","audiences":["b"],"jwks_file":"j","jwks":"x"}]}})") ==
          "unknown key auth.oidc[0].jwks");
    CHECK(error_of(R"({"auth":{"oidc":[{"issuer":"i","audiences":["b"],"jwks_file":"j"},
        {"issuer":"i","audiences":["c"],"jwks_file":"k"}]}})") == "auth.oidc[1].issuer: \"i\" is listed twice");
}

TEST_CASE("identity sources keep their names apart", "[auth]") {
    auto config = parse_config(R"({"auth":{"htpasswd":"","oidc":[
        {"issuer":"https://k8s","audiences":["b"],"jwks_file":"j","service_accounts":true},
        {"issuer":"https://dex","audiences":["b"],"jwks_file":"j","username_prefix":"dex:"}]}})");
    CHECK(config.auth.oidc[0].user_prefix().empty());
    CHECK(config.auth.oidc[1].user_prefix() == "dex:");
    CHECK(config.auth.oidc[1].group_prefix() == "dex:");
    berth::auth::OidcIssuer plain;
    plain.issuer = "https://sso.example";
    CHECK(plain.user_prefix() == "issuer:https://sso.example#");
    const std::string ldap = R"("ldap":{"url":"ldaps://dc","user_search_base":"ou=p")";
    // htpasswd's names hold no ':': "ldap:" cannot meet them, "ldap-" can ("ldap-bob" could be either).
    CHECK(error_of(R"({"auth":{"htpasswd":"h",)" + ldap + R"(}}})").empty());
    CHECK(error_of(R"({"auth":{"htpasswd":"h",)" + ldap + R"(,"username_prefix":"ldap-"}}})")
              .find("auth.ldap.username_prefix: the username prefix \"ldap-\" can meet auth.htpasswd's") == 0);
    CHECK(error_of(R"({"auth":{"oidc":[{"issuer":"a","audiences":["b"],"jwks_file":"j","service_accounts":true},
        {"issuer":"c","audiences":["b"],"jwks_file":"j","service_accounts":true}]}})")
              .find("auth.oidc[1].username_prefix") == 0);  // two clusters' service accounts need prefixes
    CHECK(error_of(R"({"auth":{"oidc":[{"issuer":"a","audiences":["b"],"jwks_file":"j","username_prefix":"x:"},
        {"issuer":"c","audiences":["b"],"jwks_file":"j","username_prefix":"x:y"}]}})")
              .find("can meet") != std::string::npos);
}

TEST_CASE("auth.ldap keeps its key names and is checked at start") {
    auto config = parse_config(R"({"auth":{"ldap":{"url":"ldaps://dc.example:636",
        "user_search_base":"ou=people,dc=example","group_search_base":"ou=groups,dc=example",
        "timeout_seconds":3,"cache_seconds":0}}})");
    auto& ldap = config.auth.ldap;
    CHECK(config.auth.enabled());
    CHECK(ldap.url == "ldaps://dc.example:636");
    CHECK(ldap.user_filter == "(&(objectClass=inetOrgPerson)(uid={username}))");
    CHECK(ldap.group_filter == "(&(objectClass=groupOfNames)(member={dn}))");
    CHECK(ldap.timeout.count() == 3);
    CHECK(ldap.cache_seconds.count() == 0);
    CHECK(error_of(R"J({"auth":{"ldap":{"url":"ldap://dc","user_search_base":"o=x","user_filter":"(uid=x)"}}})J") ==
          "auth.ldap.user_filter must be an LDAP filter in parentheses holding {username}");
    CHECK(error_of(R"({"auth":{"ldap":{"url":"ldap://dc"}}})") == "auth.ldap.user_search_base is required");
    CHECK(error_of(R"({"auth":{"ldap":{"url":"ldap://dc","user_search_base":"o=x","bind_dn":"cn=a"}}})") ==
          "auth.ldap: bind_dn and bind_password_file go together");
    CHECK(error_of(R"({"auth":{"ldap":{"url":"ldap://dc","user_search_base":"o=x","timeout_seconds":0}}})") ==
          "auth.ldap.timeout_seconds must be from 1 to 60");
}

TEST_CASE("the node agent lets the replicas decide who reads unless told otherwise") {
    auto config = parse_config(R"({"agent":{"replicas":["http://berth:5000"]}})");
    CHECK(config.proxy.agent_authorize == berth::proxy::Options::Authorize::caller);
    CHECK(config.proxy.agent_decision_ttl.count() == 10);
    CHECK(config.proxy.agent_outage_ttl.count() == 3600);
    config = parse_config(
        R"({"agent":{"replicas":["http://berth:5000"],"authorize":"agent","decision_seconds":5,
            "outage_decision_seconds":0}})");
    CHECK(config.proxy.agent_authorize == berth::proxy::Options::Authorize::agent);
    CHECK(config.proxy.agent_decision_ttl.count() == 5);
    CHECK(config.proxy.agent_outage_ttl.count() == 0);
    CHECK(error_of(R"({"agent":{"replicas":["http://berth:5000"],"authorize":"nobody"}})")
              .starts_with("agent.authorize must be"));
    CHECK(error_of(R"({"agent":{"replicas":["http://berth:5000"],"decision_seconds":301}})") ==
          "agent.decision_seconds must be at most 300");
    CHECK(error_of(R"({"agent":{"replicas":["http://b:5000"]},"auth":{"htpasswd":"/dev/null"}})")
              .starts_with("agent and auth exclude each other"));
}
