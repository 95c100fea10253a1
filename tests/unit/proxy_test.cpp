// Registry proxying's pieces that need no upstream: the challenge parser, the
// blob readers follow while it fills, ns validation, name resolution and the
// configuration of upstreams and the agent.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <fstream>

#include "berth/config/config.hpp"
#include "berth/oci/names.hpp"
#include "berth/storage/filling_blob.hpp"
#include "proxy/answers.hpp"
#include "berth/remote/challenge.hpp"
#include "berth/remote/token.hpp"
#include "temp_dir.hpp"

using berth::remote::parse_challenge;
using berth::storage::FillingBlob;
using berth::storage::OpenBlob;

TEST_CASE("challenges are read as registries send them") {
    auto bearer = parse_challenge(
        R"(Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/nginx:pull")");
    CHECK(bearer.scheme == "bearer");
    CHECK(bearer.params["realm"] == "https://auth.docker.io/token");
    CHECK(bearer.params["service"] == "registry.docker.io");
    CHECK(bearer.params["scope"] == "repository:library/nginx:pull");
    auto basic = parse_challenge(R"(Basic realm="Registry Realm")");
    CHECK(basic.scheme == "basic");
    CHECK(basic.params["realm"] == "Registry Realm");
    auto spaced = parse_challenge(R"(  bearer  Realm = "a\"b" , service=plain)");
    CHECK(spaced.params["realm"] == "a\"b");
    CHECK(spaced.params["service"] == "plain");
    CHECK(parse_challenge("").scheme.empty());
    CHECK(parse_challenge("Bearer realm=\"unterminated").params["realm"] == "unterminated");
}

TEST_CASE("a filling blob holds back its last byte until verified") {
    TempDir dir;
    auto path = dir.path() / "f";
    std::ofstream(path) << "hello";
    auto shared = std::make_shared<FillingBlob>(OpenBlob(::open(path.c_str(), O_RDONLY), 5));
    auto& blob = *shared;
    CHECK(blob.readable() == 0);
    int woken = 0;
    blob.when_readable(0, [&] { ++woken; });
    blob.when_readable(3, [&] { ++woken; });
    blob.wrote(2);
    CHECK(woken == 1);
    CHECK(blob.readable() == 2);
    blob.wrote(5);
    CHECK(blob.readable() == 4);  // all written, not yet verified
    CHECK(woken == 2);
    blob.when_readable(4, [&] { ++woken; });
    CHECK(woken == 2);
    blob.verified();
    CHECK(woken == 3);
    CHECK(blob.readable() == 5);
    blob.when_readable(1, [&] { ++woken; });  // readable already: at once
    CHECK(woken == 4);

    auto reader = blob.reader();
    CHECK(reader.filling() == shared);
    char buffer[5];
    CHECK(reader.read(0, buffer) == 5);
}

TEST_CASE("a failed fetch wakes every reader and reads as nothing") {
    TempDir dir;
    auto path = dir.path() / "f";
    std::ofstream(path) << "x";
    FillingBlob blob(OpenBlob(::open(path.c_str(), O_RDONLY), 100));
    blob.wrote(50);
    int woken = 0;
    blob.when_readable(60, [&] { ++woken; });
    blob.fail();
    CHECK(woken == 1);
    CHECK(blob.failed());
    CHECK(blob.readable() == 0);
    FillingBlob empty(OpenBlob(::open(path.c_str(), O_RDONLY), 0));
    CHECK(empty.readable() == 0);
    empty.verified();
    CHECK(empty.readable() == 0);
}

TEST_CASE("ns names a registry host") {
    using berth::oci::valid_registry_host;
    for (auto good : {"docker.io", "quay.io", "ghcr.io", "localhost", "localhost:5000", "my-registry.example.com:443"})
        CHECK(valid_registry_host(good));
    for (auto bad :
         {"", "UPPER.io", "..bad", "a..b", "-a.io", "a-.io", "a.io:", "a.io:123456", "a.io:x", "a/b", "a_b.io"})
        CHECK_FALSE(valid_registry_host(bad));
    CHECK_FALSE(valid_registry_host(std::string(256, 'a')));
}

namespace {
std::string config_error(const std::string& text, const std::filesystem::path& base = ".") {
    try {
        berth::config::parse_config(text, base);
    } catch (const berth::config::ConfigError& error) {
        return error.what();
    }
    return "";
}
}  // namespace

TEST_CASE("upstreams are configured with the documented keys") {
    TempDir dir;
    std::ofstream(dir.path() / "pw") << "s3cret\n";
    std::ofstream(dir.path() / "ca.crt") << "x";
    auto config = berth::config::parse_config(R"({"proxy":{"upstreams":[
        {"host":"docker.io","url":"https://registry-1.docker.io","ca_file":"ca.crt","insecure":false,
         "username":"alice","password_file":"pw","check_interval_seconds":60,"max_concurrent":4},
        {"host":"quay.io","url":"http://127.0.0.1:5001/prefix"}]}})",
                                              dir.path());
    REQUIRE(config.proxy.upstreams.size() == 2);
    auto& docker = config.proxy.upstreams[0];
    CHECK(docker.host == "docker.io");
    CHECK(docker.urls == std::vector<std::string>{"https://registry-1.docker.io"});
    CHECK(docker.ca_file == (dir.path() / "ca.crt").string());
    CHECK(docker.password == "s3cret");
    CHECK(docker.check_interval == std::chrono::seconds(60));
    CHECK(docker.max_concurrent == 4);
    CHECK(config.proxy.upstreams[1].check_interval == std::chrono::seconds(300));
    CHECK_FALSE(config.proxy.agent);
}

TEST_CASE("bad upstream configuration names the key") {
    CHECK(config_error(R"({"proxy":{"upstreams":[{"host":"docker.io"}]}})") == "proxy.upstreams[0].url is required");
    CHECK(config_error(R"({"proxy":{"upstreams":[{"url":"http://x"}]}})") == "proxy.upstreams[0].host is required");
    CHECK(config_error(R"({"proxy":{"upstreams":[{"host":"a.io","url":"ftp://x"}]}})").find("proxy.upstreams[0].url") ==
          0);
    CHECK(config_error(R"({"proxy":{"upstreams":[{"host":"a.io:5000","url":"http://x"}]}})")
              .find("proxy.upstreams[0].host") == 0);
    CHECK(
        config_error(R"({"proxy":{"upstreams":[{"host":"A.io","url":"http://x"}]}})").find("proxy.upstreams[0].host") ==
        0);
    CHECK(config_error(R"({"proxy":{"upstreams":[{"host":"a.io","url":"http://x"},{"host":"a.io","url":"http://y"}]}})")
              .find("proxy.upstreams[1].host") == 0);
    CHECK(config_error(R"({"proxy":{"upstreams":[{"host":"a.io","url":"http://x","password_file":"/nonexistent"}]}})")
              .find("proxy.upstreams[0]") == 0);
    CHECK(
        config_error(
            R"({"proxy":{"upstreams":[{"host":"a.io","url":"http://x","username":"u","password_file":"/nonexistent"}]}})")
            .find("proxy.upstreams[0].password_file") == 0);
    CHECK(config_error(R"({"proxy":{"upstreams":[{"host":"a.io","url":"http://x","ca_file":"/nonexistent"}]}})")
              .find("proxy.upstreams[0].ca_file") == 0);
    CHECK(config_error(R"({"proxy":{"upstreams":[{"host":"a.io","url":"http://x","bogus":1}]}})") ==
          "unknown key proxy.upstreams[0].bogus");
    CHECK(config_error(R"({"proxy":{"upstreams":[{"host":"a.io","url":"http://x","max_concurrent":0}]}})")
              .find("proxy.upstreams[0].max_concurrent") == 0);
}

TEST_CASE("the agent reads its replicas and excludes replication and upstreams") {
    auto config = berth::config::parse_config(
        R"({"agent":{"replicas":["https://berth-replicas:5000","http://10.0.0.7:5000"]},"cache":{"max_bytes":1000}})");
    CHECK(config.proxy.agent);
    CHECK(config.registry.pull_only);
    CHECK(config.proxy.cache_max_bytes == 1000);
    REQUIRE(config.proxy.upstreams.size() == 1);
    CHECK(config.proxy.upstreams[0].host.empty());
    CHECK(config.proxy.upstreams[0].urls.size() == 2);
    CHECK(config_error(R"({"agent":{"replicas":[]}})") == "agent.replicas must list the replicas' URLs");
    CHECK(config_error(R"({"agent":{"replicas":["nope"]}})").find("agent.replicas[0]") == 0);
    CHECK(config_error(R"({"agent":{"replicas":["http://a:1"],"cert_file":"c"}})") ==
          "agent: cert_file and key_file go together");
    CHECK(config_error(
              R"({"agent":{"replicas":["http://a:1"]},"proxy":{"upstreams":[{"host":"a.io","url":"http://x"}]}})")
              .find("agent and proxy.upstreams") == 0);
    CHECK(config_error(R"({"cache":{"max_bytes":5}})").find("cache.max_bytes") == 0);
}

TEST_CASE("replicas serving TLS reach each other over TLS; client certificates may be optional") {
    TempDir dir;
    for (auto name : {"c.pem", "k.pem", "ca.pem"}) std::ofstream(dir.path() / name) << "x";
    std::ofstream(dir.path() / "s") << "0123456789abcdef0123";
    auto config = berth::config::parse_config(
        R"({"tls":{"cert":"c.pem","key":"k.pem","client_ca":"ca.pem","client_auth":"optional"},
            "replication":{"peers":["a:1"],"secret_file":"s"}})",
        dir.path());
    CHECK_FALSE(config.server.tls_client_cert_required);
    CHECK(config.replication.tls.enabled);
    CHECK(config.replication.tls.ca_file == (dir.path() / "ca.pem").string());
    CHECK(config.replication.tls.cert_file == (dir.path() / "c.pem").string());
    CHECK(berth::config::parse_config(R"({"tls":{"cert":"c","key":"k","client_ca":"ca"}})")
              .server.tls_client_cert_required);
    CHECK(config_error(R"({"tls":{"cert":"c","key":"k","client_auth":"maybe"}})").find("tls.client_auth") == 0);
    CHECK(config_error(R"({"replication":{"ca_file":"x"}})").find("replication.ca_file") == 0);
    CHECK_FALSE(berth::config::parse_config("{}").replication.tls.enabled);
}

TEST_CASE("an upstream's tag page never pages on from nothing, nor back") {
    using berth::proxy::answers::parse_tag_list;
    // The crash: a Link on an empty page.
    for (auto body :
         {R"({"name":"x","tags":[]})", R"({"name":"x","tags":null})", R"({"name":"x","tags":["BAD TAG"]})"}) {
        auto page = parse_tag_list(body, true, "", 10);
        REQUIRE(page);
        CHECK(page->tags.empty());
        CHECK_FALSE(page->more);
    }
    // An upstream that ignores `last` hands back the first page: nothing after last, no more.
    auto again = parse_tag_list(R"({"tags":["a","b","c"]})", true, "c", 3);
    REQUIRE(again);
    CHECK(again->tags.empty());
    CHECK_FALSE(again->more);
    // More tags than asked for: the page is cut at n and says there is more.
    auto over = parse_tag_list(R"({"tags":["d","c","b","a"]})", false, "", 2);
    REQUIRE(over);
    CHECK(over->more);
    CHECK(over->tags.size() == 2);
    auto after = parse_tag_list(R"({"tags":["a","b","c"]})", true, "a", 10);
    REQUIRE(after);
    CHECK(after->tags == std::vector<std::string>{"b", "c"});
    CHECK(after->more);
    CHECK_FALSE(parse_tag_list("[[[[", true, "", 10));
    CHECK_FALSE(parse_tag_list(std::string(100000, '['), true, "", 10));
}

TEST_CASE("token answers are read with bounds") {
    using berth::remote::parse_token;
    auto token = parse_token(R"({"token":"abc","expires_in":300})");
    REQUIRE(token);
    CHECK(token->value == "abc");
    CHECK(token->lifetime == std::chrono::seconds(290));
    CHECK(parse_token(R"({"access_token":"x","expires_in":99999999})")->lifetime == std::chrono::seconds(3590));
    CHECK_FALSE(parse_token(R"({"token":"has space"})"));
    CHECK_FALSE(parse_token(R"({"token":""})"));
    CHECK_FALSE(parse_token(std::string(70000, ' ') + "{}"));
    CHECK_FALSE(parse_token(R"({"token":)" + std::string(100, '[')));
    CHECK(berth::proxy::answers::media_type_of("application/json", std::string(4000, '[')) == "application/json");
    CHECK(berth::proxy::answers::media_type_of("application/json; charset=utf-8",
                                               R"({"mediaType":"application/vnd.oci.image.index.v1+json"})") ==
          "application/vnd.oci.image.index.v1+json");
}
