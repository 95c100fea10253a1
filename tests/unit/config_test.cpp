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
    CHECK(error_of(R"({"listen":"nohost"})").find("listen address") == 0);
    CHECK(error_of(R"({"listen":"h:99999"})").find("listen port") == 0);
    CHECK(error_of(R"({"tcp":{"same_host_congestion_control":"Reno; rm"}})").find("tcp.same_host_congestion_control") == 0);
    CHECK(error_of(R"({"tcp":{"same_host_congestion_control":"a_name_of_16chrs"}})").find("tcp.same_host") == 0);
    CHECK(error_of(R"({"tls":{"kernel_tls":"yes"}})") == "tls.kernel_tls must be true or false");
    CHECK(error_of(R"({"sparse_manifests":"cache/**"})") == "sparse_manifests must be an array of strings");
    CHECK(error_of(R"({"sparse_manifests":["Cache/*"]})").find("sparse_manifests: \"Cache/*\"") == 0);
}

TEST_CASE("listen accepts IPv6 in brackets") {
    Config config;
    set_listen(config, "[::1]:5001");
    CHECK(config.server.host == "::1");
    CHECK(config.server.port == 5001);
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
    CHECK(error_of(R"({"quotas":[{"namespaces":"a","max_bytes":"1"}]})").find("quotas[0].max_bytes must be a whole") == 0);
    CHECK(error_of(R"({"quotas":[{"namespaces":"a","max_bytes":-1}]})").find("quotas[0].max_bytes must be a whole") == 0);
    CHECK(error_of(R"({"quotas":[{"namespaces":"a","max_bytes":1.5}]})").find("quotas[0].max_bytes must be a whole") == 0);
    CHECK(error_of(R"({"quotas":[{"namespaces":"a","max_bytes":0}]})") ==
          "quotas[0].max_bytes must be at least 1 (leave it out for no limit)");
    CHECK(error_of(R"({"quotas":[{"namespaces":"a","max_repositories":0}]})") ==
          "quotas[0].max_repositories must be at least 1 (leave it out for no limit)");
    CHECK(error_of(R"({"quotas":[{"namespaces":"a","max_repositories":5000000000}]})")
              .find("quotas[0].max_repositories must be a whole") == 0);
    CHECK(error_of(R"({"quotas":[{"namespaces":"team/*"}]})").find("quotas[0].namespaces: \"team/*\" is not a namespace glob") == 0);
    CHECK(error_of(R"({"quotas":[{"namespaces":"Team"}]})").find("is not a namespace glob") != std::string::npos);
    CHECK(error_of(R"({"quotas":[{"namespaces":"[ab]"}]})").find("is not a namespace glob") != std::string::npos);
    CHECK(error_of(R"({"quotas":[{"namespaces":"a","max_bytes":1},{"namespaces":"a","max_bytes":2}]})") ==
          "quotas[1].namespaces: \"a\" is listed twice");
}
