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

TEST_CASE("change-log retention and the metadata cache budget are checked at start-up") {
    auto config = parse_config(
        R"({"replication":{"log_retention_seconds":60,"log_max_entries":5000},"cache":{"memory_bytes":1048576}})");
    CHECK(config.replication.log_retention.window == std::chrono::seconds(60));
    CHECK(config.replication.log_retention.max_entries == 5000);
    CHECK(config.metadata_cache_bytes == 1048576);
    CHECK(parse_config("{}").replication.log_retention.window == std::chrono::seconds(3600));
    CHECK(parse_config("{}").metadata_cache_bytes == berth::storage::MetaStore::default_cache_bytes);
    CHECK(error_of(R"({"replication":{"log_max_entries":999}})") == "replication.log_max_entries must be at least 1000");
    CHECK(error_of(R"({"replication":{"log_retention_seconds":-1}})").find("replication.log_retention_seconds") == 0);
    CHECK(error_of(R"({"replication":{"log_retention":60}})") == "unknown key replication.log_retention");
    CHECK(error_of(R"({"cache":{"memory_bytes":"64M"}})").find("cache.memory_bytes must be a whole number") == 0);
}
