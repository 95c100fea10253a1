#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "berth/oci/encoding.hpp"
#include "auth/jwt.hpp"
#include "auth/ldap.hpp"
#include "auth/rules.hpp"
#include "temp_dir.hpp"

using namespace berth::auth;

TEST_CASE("rules grant by user, group, authenticated and anonymous, with ${user}") {
    Options options;
    options.groups["ci"] = {"bot"};
    options.rules = {{"${user}/**", {"authenticated"}, {Action::pull, Action::push, Action::del}},
                     {"tools/*", {"group:ci"}, {Action::push}},
                     {"tools/*", {"user:alice"}, {Action::del}},
                     {"**", {"anonymous", "authenticated"}, {Action::pull}}};
    CHECK(allowed_actions(options, {"alice"}, "alice/app").count(Action::push));
    CHECK_FALSE(allowed_actions(options, {"alice"}, "bob/app").count(Action::push));
    CHECK(allowed_actions(options, {"alice"}, "bob/app").count(Action::pull));
    CHECK(allowed_actions(options, {"bot"}, "tools/x").count(Action::push));
    CHECK_FALSE(allowed_actions(options, {"alice"}, "tools/x").count(Action::push));
    CHECK(allowed_actions(options, {"alice"}, "tools/x").count(Action::del));
    CHECK(allowed_actions(options, {""}, "anything") == std::set<Action>{Action::pull});
    Options no_rules;
    CHECK(allowed_actions(no_rules, {""}, "x").empty());
    CHECK(allowed_actions(no_rules, {"someone"}, "x").size() == 3);
}

TEST_CASE("a user or namespace name that is no path component never widens a rule") {
    Options options;
    options.rules = {{"${user}/**", {"authenticated"}, {Action::pull, Action::push}},
                     {"teams/${namespace}/**", {"authenticated"}, {Action::pull}}};
    for (const char* name : {"*", "**", "a/b", "*/x", "Alice", "a b"}) {
        CHECK(allowed_actions(options, {name}, "bob/app").empty());
        CHECK(allowed_actions(options, {"someone", {}, name}, "teams/x/app").empty());
    }
    CHECK(allowed_actions(options, {"alice"}, "alice/app").size() == 2);
    CHECK(allowed_actions(options, {"system:serviceaccount:team-a:ci", {}, "team-a"}, "teams/team-a/app").size() == 1);
}

TEST_CASE("JWTs: signed with the configured key verify; anything else does not") {
    TempDir dir;
    auto key_file = (dir.path() / "k.pem").string(), other_file = (dir.path() / "o.pem").string();
    auto run = [](const std::string& command) { REQUIRE(std::system(command.c_str()) == 0); };
    run("openssl ecparam -name prime256v1 -genkey -noout -out " + key_file + " 2>/dev/null");
    run("openssl genrsa -out " + other_file + " 2048 2>/dev/null");
    auto key = JwtKey::load_private(key_file);
    auto other = JwtKey::load_private(other_file);
    CHECK(key->algorithm() == "ES256");
    CHECK(other->algorithm() == "RS256");

    using namespace std::chrono;
    const auto now = system_clock::now();
    const auto t = duration_cast<seconds>(now.time_since_epoch()).count();
    nlohmann::json claims = {{"iss", "berth"}, {"aud", "berth"}, {"sub", "alice"}, {"exp", t + 60}, {"nbf", t - 1}};
    TokenCheck check{"berth", {"berth"}, now};
    std::string error;
    CHECK(verify_jwt(sign_jwt(*key, claims), {key}, check, error));
    CHECK_FALSE(verify_jwt(sign_jwt(*other, claims), {key}, check, error));
    CHECK(verify_jwt(sign_jwt(*other, claims), {key, other}, check, error));

    auto expired = claims;
    expired["exp"] = t - 3600;
    CHECK_FALSE(verify_jwt(sign_jwt(*key, expired), {key}, check, error));
    CHECK(error == "token expired");
    auto foreign = claims;
    foreign["iss"] = "elsewhere";
    CHECK_FALSE(verify_jwt(sign_jwt(*key, foreign), {key}, check, error));
    auto audience = claims;
    audience["aud"] = nlohmann::json::array({"other", "berth"});
    CHECK(verify_jwt(sign_jwt(*key, audience), {key}, check, error));

    auto token = sign_jwt(*key, claims);
    auto dot = token.find('.');
    // alg "none" with the signature stripped
    auto none = berth::oci::base64url(R"({"alg":"none"})") + token.substr(dot, token.rfind('.') - dot) + ".";
    CHECK_FALSE(verify_jwt(none, {key}, check, error));
    // a payload changed after signing
    auto tampered = claims;
    tampered["sub"] = "root";
    auto forged = token.substr(0, dot) + "." + berth::oci::base64url(tampered.dump()) + token.substr(token.rfind('.'));
    CHECK_FALSE(verify_jwt(forged, {key}, check, error));
    CHECK_FALSE(verify_jwt(std::string(max_token_bytes + 1, 'a'), {key}, check, error));
}

TEST_CASE("values placed in LDAP filters are escaped as RFC 4515 says") {
    using berth::auth::escape_filter_value;
    CHECK(escape_filter_value("alice") == "alice");
    CHECK(escape_filter_value("*") == "\\2a");
    CHECK(escape_filter_value("a)(uid=*") == "a\\29\\28uid=\\2a");
    CHECK(escape_filter_value(std::string("a\0b\\", 4)) == "a\\00b\\5c");
    CHECK(escape_filter_value("uid=al ice,ou=people") == "uid=al ice,ou=people");
    CHECK(escape_filter_value("j\xc3\xbcrgen") == "j\\c3\\bcrgen");
}
