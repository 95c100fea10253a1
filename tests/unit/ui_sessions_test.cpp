// The web UI's sign-in, without a server: session cookies (ui::Sessions), the same-origin check of
// the sign-in form, the form's check of a username and password (ui::sign_in), and the files the
// binary serves (ui::find_file).
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "berth/auth/authorizer.hpp"
#include "berth/oci/encoding.hpp"
#include "berth/ui/files.hpp"
#include "berth/ui/sessions.hpp"
#include "berth/ui/sign_in.hpp"
#include "error_code.hpp"
#include "temp_dir.hpp"

using namespace berth;
using nlohmann::json;
using oci::ErrorCode;

namespace {

const std::string key_a(32, 'a'), key_b(32, 'b');

std::int64_t now_seconds() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// The Cookie header a browser sends back for a Set-Cookie value: its name=value, without attributes.
std::string cookie_of(const std::string& set_cookie) { return set_cookie.substr(0, set_cookie.find(';')); }

// The cookie's value (payload.mac).
std::string value_of(const std::string& set_cookie) {
    auto pair = cookie_of(set_cookie);
    return pair.substr(pair.find('=') + 1);
}

// The attributes after the value, each with its leading "; ".
std::string attributes_of(const std::string& set_cookie) { return set_cookie.substr(set_cookie.find(';')); }

std::string max_age_of(const std::string& set_cookie) {
    const std::string marker = "; Max-Age=";
    auto at = set_cookie.find(marker);
    if (at == std::string::npos) return "";
    auto from = at + marker.size();
    return set_cookie.substr(from, set_cookie.find(';', from) - from);
}

// The JSON a cookie's payload holds.
json payload_of(const std::string& set_cookie) {
    auto value = value_of(set_cookie);
    auto decoded = oci::base64url_decode(value.substr(0, value.find('.')));
    REQUIRE(decoded);
    return json::parse(*decoded);
}

// A cookie of payload sealed with key, as only a holder of the key could make one.
std::string sealed_raw(const std::string& key, const std::string& payload) {
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(payload.data()),
         payload.size(), mac, &length);
    return std::string(ui::session_cookie) + "=" + payload + "." +
           oci::base64url(std::string(reinterpret_cast<const char*>(mac), length));
}
// The same over any payload text, encoded as a session's is.
std::string sealed_cookie(const std::string& key, const std::string& payload_text) {
    return sealed_raw(key, oci::base64url(payload_text));
}

const auth::Principal alice{"alice", {"dev", "ops"}, "team-a"};

}  // namespace

TEST_CASE("a session cookie names who signed in and reads back", "[ui]") {
    ui::Sessions sessions(key_a, std::chrono::seconds(3600));
    const auto cookie = sessions.sign_in(alice, false, std::nullopt, "gen-1");
    CHECK(cookie.starts_with("berth_session="));
    CHECK(attributes_of(cookie) == "; Max-Age=3600; HttpOnly; SameSite=Strict");
    CHECK(cookie.find("Path=") == std::string::npos);  // the folder the browser saw /ui/ in

    auto session = sessions.session(cookie_of(cookie));
    REQUIRE(session);
    CHECK(session->principal.name == "alice");
    CHECK(session->principal.groups == std::vector<std::string>{"dev", "ops"});
    CHECK(session->principal.ns == "team-a");
    CHECK(session->generation == "gen-1");

    // Over TLS the cookie is Secure, and reads back the same.
    const auto secure = sessions.sign_in(alice, true, std::nullopt, "");
    CHECK(attributes_of(secure) == "; Max-Age=3600; HttpOnly; SameSite=Strict; Secure");
    REQUIRE(sessions.session(cookie_of(secure)));
    CHECK(sessions.session(cookie_of(secure))->generation.empty());

    // The payload holds the principal and when it ends: the lifetime from now.
    const auto before = now_seconds();
    auto payload = payload_of(sessions.sign_in(alice, false, std::nullopt, "g"));
    CHECK(payload["u"] == "alice");
    CHECK(payload["n"] == "team-a");
    CHECK(payload["c"] == "g");
    CHECK(payload["e"].get<std::int64_t>() >= before + 3600);
    CHECK(payload["e"].get<std::int64_t>() <= now_seconds() + 3600);
}

TEST_CASE("a session never outlives the credential it came from", "[ui]") {
    ui::Sessions sessions(key_a, std::chrono::seconds(3600));
    const auto now = now_seconds();

    // A credential good for longer than the lifetime: the lifetime.
    auto longer = sessions.sign_in(alice, false, now + 100000, "");
    CHECK(max_age_of(longer) == "3600");
    CHECK(sessions.session(cookie_of(longer)));

    // A token ending sooner: the session ends with it.
    auto shorter = sessions.sign_in(alice, false, now + 100, "");
    CHECK(payload_of(shorter)["e"].get<std::int64_t>() == now + 100);
    const auto max_age = std::stoll(max_age_of(shorter));
    CHECK(max_age <= 100);
    CHECK(max_age > 0);
    CHECK(sessions.session(cookie_of(shorter)));

    // A credential already expired: the browser drops the cookie, and a copy of it is refused.
    auto expired = sessions.sign_in(alice, false, now - 10, "");
    CHECK(max_age_of(expired) == "0");
    CHECK(payload_of(expired)["e"].get<std::int64_t>() == now - 10);
    CHECK_FALSE(sessions.session(cookie_of(expired)));

    // A short lifetime caps a long credential.
    ui::Sessions brief(key_a, std::chrono::seconds(60));
    CHECK(max_age_of(brief.sign_in(alice, false, now + 100000, "")) == "60");
}

TEST_CASE("a session cookie changed in any part, or sealed elsewhere, is no session", "[ui]") {
    ui::Sessions sessions(key_a, std::chrono::seconds(3600));
    const auto value = value_of(sessions.sign_in(alice, false, std::nullopt, "gen"));
    const auto dot = value.find('.');
    const auto payload = value.substr(0, dot), mac = value.substr(dot + 1);
    REQUIRE(sessions.session("berth_session=" + payload + "." + mac));

    // Another principal in the payload, the MAC unchanged.
    auto doc = payload_of("berth_session=" + value);
    doc["u"] = "root";
    CHECK_FALSE(sessions.session("berth_session=" + oci::base64url(doc.dump()) + "." + mac));
    // One character of either part flipped.
    auto flip = [](std::string text, std::size_t at) {
        text[at] = text[at] == 'A' ? 'B' : 'A';
        return text;
    };
    CHECK_FALSE(sessions.session("berth_session=" + flip(payload, payload.size() / 2) + "." + mac));
    CHECK_FALSE(sessions.session("berth_session=" + payload + "." + flip(mac, 0)));
    CHECK_FALSE(sessions.session("berth_session=" + payload + "." + mac.substr(0, mac.size() - 1)));
    CHECK_FALSE(sessions.session("berth_session=" + payload + "." + mac + "A"));
    CHECK_FALSE(sessions.session("berth_session=" + payload + "." + mac + "." + mac));
    // Another key's cookie, and this key's cookie at another key's Sessions.
    ui::Sessions other(key_b, std::chrono::seconds(3600));
    CHECK_FALSE(other.session("berth_session=" + value));
    CHECK_FALSE(sessions.session(cookie_of(other.sign_in(alice, false, std::nullopt, "gen"))));
}

TEST_CASE("a sealed session is refused when expired, anonymous or not of this berth's shape", "[ui]") {
    ui::Sessions sessions(key_a, std::chrono::seconds(3600));
    const auto now = now_seconds();
    auto body = [](std::int64_t until) {
        return json{{"u", "alice"}, {"g", json::array()}, {"n", ""}, {"e", until}, {"c", "gen"}};
    };
    // What the test seals reads back (so each refusal below is the payload's doing).
    auto good = sessions.session(sealed_cookie(key_a, body(now + 1000).dump()));
    REQUIRE(good);
    CHECK(good->principal.name == "alice");
    CHECK(good->generation == "gen");

    CHECK_FALSE(sessions.session(sealed_cookie(key_a, body(now).dump())));  // ends now: over
    CHECK_FALSE(sessions.session(sealed_cookie(key_a, body(now - 1).dump())));
    auto anonymous = body(now + 1000);
    anonymous["u"] = "";
    CHECK_FALSE(sessions.session(sealed_cookie(key_a, anonymous.dump())));
    CHECK_FALSE(sessions.session(cookie_of(sessions.sign_in({"", {"dev"}, "team-a"}, false, std::nullopt, ""))));

    // An older shape without the credential's generation: the session, with none.
    auto older = body(now + 1000);
    older.erase("c");
    auto session = sessions.session(sealed_cookie(key_a, older.dump()));
    REQUIRE(session);
    CHECK(session->generation.empty());

    // Sealed, but no session: not JSON, not an object, members missing or of other types.
    for (std::string text : {"", "not json", "[1,2]", "{}", "null"})
        CHECK_FALSE(sessions.session(sealed_cookie(key_a, text)));
    for (auto [member, value] : std::vector<std::pair<std::string, json>>{
             {"e", "soon"}, {"e", nullptr}, {"u", 7}, {"g", "dev"}, {"g", json::array({1})}, {"n", json::array()}}) {
        auto doc = body(now + 1000);
        doc[member] = value;
        CHECK_FALSE(sessions.session(sealed_cookie(key_a, doc.dump())));
    }
    for (auto missing : {"u", "g", "n", "e"}) {
        auto doc = body(now + 1000);
        doc.erase(missing);
        CHECK_FALSE(sessions.session(sealed_cookie(key_a, doc.dump())));
    }
    // Sealed over text that is not base64url.
    CHECK_FALSE(sessions.session(sealed_raw(key_a, "%%%")));
    CHECK_FALSE(sessions.session(sealed_raw(key_a, "")));
}

TEST_CASE("the session cookie is found among others; malformed or oversized headers hold none", "[ui]") {
    ui::Sessions sessions(key_a, std::chrono::seconds(3600));
    const auto cookie = cookie_of(sessions.sign_in(alice, false, std::nullopt, "gen"));

    for (auto header :
         {"theme=dark; " + cookie, cookie + "; theme=dark", "a=1; " + cookie + "; b=2", "a=1;" + cookie + ";b=2",
          "berth_session_old=junk; " + cookie, "berth_sessionx=1; " + cookie, "a=1;   " + cookie}) {
        INFO(header);
        auto session = sessions.session(header);
        REQUIRE(session);
        CHECK(session->principal.name == "alice");
    }
    // The value under another name is no session.
    const auto value = cookie.substr(cookie.find('=') + 1);
    for (auto header :
         std::vector<std::string>{"", "theme=dark", "berth_session", "berth_session=", "berth_session=.",
                                  "berth_session=abc", "berth_sessionx=" + value, "xberth_session=" + value,
                                  "Berth_Session=" + value, "berth_session =" + value, value}) {
        INFO(header);
        CHECK_FALSE(sessions.session(header));
    }

    // A session sealed here, but longer than any browser keeps (4 KiB), is refused.
    auth::Principal crowded = alice;
    crowded.groups.assign(100, std::string(40, 'g'));
    const auto big = sessions.sign_in(crowded, false, std::nullopt, "gen");
    REQUIRE(value_of(big).size() > 4096);
    CHECK_FALSE(sessions.session(cookie_of(big)));
    // A few groups fit.
    crowded.groups.resize(10);
    const auto fits = sessions.sign_in(crowded, false, std::nullopt, "gen");
    REQUIRE(value_of(fits).size() <= 4096);
    REQUIRE(sessions.session(cookie_of(fits)));
    CHECK(sessions.session(cookie_of(fits))->principal.groups.size() == 10);
    // An oversized header of junk around it does not hide it.
    CHECK(sessions.session("junk=" + std::string(10000, 'x') + "; " + cookie));
}

TEST_CASE("signing out clears the cookie", "[ui]") {
    CHECK(ui::Sessions::sign_out(false) == "berth_session=; Max-Age=0; HttpOnly; SameSite=Strict");
    CHECK(ui::Sessions::sign_out(true) == "berth_session=; Max-Age=0; HttpOnly; SameSite=Strict; Secure");
    ui::Sessions sessions(key_a, std::chrono::seconds(3600));
    CHECK_FALSE(sessions.session(cookie_of(ui::Sessions::sign_out(false))));
}

TEST_CASE("the sessions' key: derived from session_secret, else drawn at start", "[ui]") {
    ui::Options options;
    options.session_secret = "correct horse battery staple";
    const auto key = ui::Sessions::key_for(options, nullptr);
    CHECK(key.size() == 32);
    CHECK(key != options.session_secret);
    CHECK(key.find(options.session_secret) == std::string::npos);
    CHECK(ui::Sessions::key_for(options, nullptr) == key);  // stable: every replica and restart agrees
    auto other = options;
    other.session_secret = "correct horse battery stapler";
    CHECK(ui::Sessions::key_for(other, nullptr) != key);

    // Two replicas with the same secret accept each other's sessions.
    ui::Sessions one(key, std::chrono::seconds(3600)),
        two(ui::Sessions::key_for(options, nullptr), std::chrono::seconds(3600));
    CHECK(two.session(cookie_of(one.sign_in(alice, false, std::nullopt, ""))));
    // A secret of its own is not the key itself.
    ui::Sessions raw(options.session_secret, std::chrono::seconds(3600));
    CHECK_FALSE(raw.session(cookie_of(one.sign_in(alice, false, std::nullopt, ""))));

    // Without a secret or peers: "", a key drawn by each Sessions.
    CHECK(ui::Sessions::key_for(ui::Options{}, nullptr).empty());
    ui::Sessions first("", std::chrono::seconds(3600)), second("", std::chrono::seconds(3600));
    const auto cookie = cookie_of(first.sign_in(alice, false, std::nullopt, ""));
    CHECK(first.session(cookie));
    CHECK_FALSE(second.session(cookie));
}

TEST_CASE("a sign-in form is taken only from this UI's own origin", "[ui]") {
    auto denied = [](const ui::FormSource& source) {
        return code_of([&] { ui::require_same_origin(source); }) == ErrorCode::denied;
    };
    auto passes = [](const ui::FormSource& source) {
        ui::require_same_origin(source);
        return true;
    };
    // Not a browser: nothing to forge.
    CHECK(passes({}));
    CHECK(passes({.host = "reg.example"}));
    // Sec-Fetch-Site: only same-origin and a typed URL (none).
    CHECK(passes({.origin = "https://reg.example", .fetch_site = "same-origin", .host = "reg.example"}));
    CHECK(passes({.origin = "https://reg.example", .fetch_site = "none", .host = "reg.example"}));
    for (auto site : {"cross-site", "same-site", "other"}) {
        CHECK(denied({.origin = "https://reg.example", .fetch_site = site, .host = "reg.example"}));
        CHECK(denied({.fetch_site = site, .host = "reg.example"}));  // without an Origin too
    }
    // Origin's host against Host, or the host a reverse proxy says the browser used.
    CHECK(passes({.origin = "http://reg.example:5000", .host = "reg.example:5000"}));
    CHECK(denied({.origin = "http://reg.example:5000", .host = "reg.example"}));
    CHECK(denied({.origin = "https://evil.example", .host = "reg.example"}));
    CHECK(denied({.origin = "https://evil.example", .fetch_site = "same-origin", .host = "reg.example"}));
    CHECK(passes({.origin = "https://reg.example", .host = "berth:5000", .forwarded_host = "reg.example"}));
    CHECK(denied({.origin = "https://evil.example", .host = "berth:5000", .forwarded_host = "reg.example"}));
    // No host in the Origin matches nothing, not even an empty Host.
    CHECK(denied({.origin = "reg.example", .host = "reg.example"}));
    CHECK(denied({.origin = "https://", .host = ""}));
    CHECK(denied({.origin = "https://", .host = "reg.example"}));
    // Over TLS, a page served without it is another origin; behind a proxy that ends TLS either is.
    CHECK(denied({.origin = "http://reg.example", .host = "reg.example", .secure = true}));
    CHECK(passes({.origin = "https://reg.example", .host = "reg.example", .secure = true}));
    CHECK(passes({.origin = "https://reg.example", .host = "reg.example", .secure = false}));
    // "null": a form of this UI's own pages (they send no referrer) when the browser says same-origin.
    CHECK(denied({.origin = "null", .host = "reg.example"}));
    CHECK(passes({.origin = "null", .fetch_site = "same-origin", .host = "reg.example"}));
    CHECK(denied({.origin = "null", .fetch_site = "cross-site", .host = "reg.example"}));
}

TEST_CASE("signing in without an authorizer, or with one that is off, needs nothing", "[ui]") {
    ui::Sessions sessions(key_a, std::chrono::seconds(3600));
    auto answer = ui::sign_in(nullptr, sessions, {}, "alice", "secret");
    CHECK(answer.location == "./");
    CHECK(answer.cookie.empty());
    auth::Authorizer off{auth::Options{}};
    REQUIRE_FALSE(off.enabled());
    answer = ui::sign_in(&off, sessions, {}, "alice", "secret");
    CHECK(answer.location == "./");
    CHECK(answer.cookie.empty());
}

TEST_CASE("signing in checks the username and password as a Basic login does", "[ui]") {
    TempDir dir;
    const auto file = dir.path() / "htpasswd";
    // bcrypt of "secret" at cost 4, so the test does not wait on the hash.
    std::ofstream(file) << "alice:$2b$04$Hti.ESXwTp/65jseUhNPEeP7tdp3wpg63PgVPksiCTHDAIE4xtPRe\n";
    auth::Options options;
    options.htpasswd_file = file.string();
    auth::Authorizer authorizer(options);
    ui::Sessions sessions(key_a, std::chrono::seconds(600));
    const ui::FormSource source{.host = "reg.example", .address = "192.0.2.1"};

    auto answer = ui::sign_in(&authorizer, sessions, source, "alice", "secret");
    CHECK(answer.location == "./");
    CHECK(attributes_of(answer.cookie) == "; Max-Age=600; HttpOnly; SameSite=Strict");
    auto session = sessions.session(cookie_of(answer.cookie));
    REQUIRE(session);
    CHECK(session->principal.name == "alice");
    // The session remembers the htpasswd entry it came from.
    CHECK_FALSE(session->generation.empty());
    CHECK(session->generation == authorizer.credential_generation(session->principal));
    CHECK(authorizer.credential_current(session->principal, session->generation));

    // Over TLS: Secure.
    auto secure = ui::sign_in(&authorizer, sessions, {.host = "reg.example", .secure = true}, "alice", "secret");
    CHECK(attributes_of(secure.cookie) == "; Max-Age=600; HttpOnly; SameSite=Strict; Secure");

    // Refused: no cookie, back to the form.
    for (auto [user, password] : std::vector<std::pair<std::string, std::string>>{{"alice", "wrong"},
                                                                                  {"alice", ""},
                                                                                  {"bob", "secret"},
                                                                                  {"", "secret"},
                                                                                  {"", ""},
                                                                                  {"alice:", "secret"},
                                                                                  {"alice:secret", ""},
                                                                                  {":alice", "secret"}}) {
        INFO(user << " / " << password);
        auto refused = ui::sign_in(&authorizer, sessions, source, user, password);
        CHECK(refused.location == "login?failed");
        CHECK(refused.cookie.empty());
    }
}

TEST_CASE("the UI's files are in the binary, each with its Content-Type", "[ui]") {
    auto index = ui::find_file("index.html");
    REQUIRE(index);
    CHECK(index->path == "index.html");
    CHECK(index->body.find("<") != std::string_view::npos);
    CHECK(ui::find_file("login.html"));
    CHECK(ui::find_file("pages/cluster.js"));
    CHECK(ui::find_file("style.css"));
    CHECK(ui::find_file("favicon.svg"));

    CHECK(ui::content_type_of("index.html") == "text/html; charset=utf-8");
    CHECK(ui::content_type_of("pages/cluster.js") == "text/javascript; charset=utf-8");
    CHECK(ui::content_type_of("style.css") == "text/css; charset=utf-8");
    CHECK(ui::content_type_of("favicon.svg") == "image/svg+xml");
    CHECK(ui::content_type_of("logo.png") == "image/png");
    CHECK(ui::content_type_of("data.bin") == "application/octet-stream");
    CHECK(ui::content_type_of("html") == "application/octet-stream");
    CHECK(ui::content_type_of("") == "application/octet-stream");
    // Every file the UI has is one the browser can use as what it is.
    for (auto& file : ui::files()) {
        INFO(file.path);
        CHECK(ui::content_type_of(file.path) != "application/octet-stream");
        CHECK_FALSE(file.body.empty());
        CHECK(ui::find_file(file.path) == &file);
    }

    for (auto path : {"../x", "../index.html", "/index.html", "./index.html", "pages/../index.html", "", "nope.js",
                      "pages", "pages/", "index.html/", "INDEX.HTML"}) {
        INFO(path);
        CHECK(ui::find_file(path) == nullptr);
    }
}
