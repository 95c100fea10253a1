#include <catch2/catch.hpp>

#include <string>

#include "berth/oci/json.hpp"
#include "berth/oci/manifest.hpp"
#include "berth/oci/error.hpp"

using namespace berth;

TEST_CASE("bounded JSON refuses deep nesting before building anything", "[json]") {
    CHECK(oci::parse_json(std::string(64, '[') + std::string(64, ']')).is_array());
    CHECK(oci::parse_json(std::string(65, '[') + std::string(65, ']')).is_discarded());
    // 4 MB of brackets (the hostile upstream's manifest) is refused outright.
    CHECK(oci::parse_json(std::string(4'000'000, '[')).is_discarded());
    CHECK(oci::json_cost(std::string(100, '['), 64) == 0);
}

TEST_CASE("bounded JSON refuses documents costing more than their budget", "[json]") {
    // Empty objects are the dearest value per byte nlohmann builds.
    std::string objects = "[";
    for (int i = 0; i < 100'000; ++i) objects += i ? ",{}" : "{}";
    objects += "]";
    CHECK(oci::json_cost(objects, 64) > objects.size() * 10);
    CHECK(oci::parse_json(objects).is_discarded());
    CHECK_FALSE(oci::parse_json(objects, {.max_cost_per_byte = 100}).is_discarded());
    // An ordinary manifest is well within.
    const std::string manifest =
        R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",)"
        R"("config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:)" +
        std::string(64, 'a') + R"(","size":7},"layers":[],"annotations":{"org.example.created":"2026-01-01"}})";
    CHECK(oci::json_cost(manifest, 64) < manifest.size() * 10);
    CHECK(oci::parse_json(manifest).is_object());
    CHECK(oci::parse_json("not json").is_discarded());
    CHECK_THROWS_AS(oci::parse_json_or_throw("{", "a test"), std::invalid_argument);
}

TEST_CASE("a pushed manifest nested past the bound is MANIFEST_INVALID", "[json]") {
    std::string deep = R"({"schemaVersion":2,"annotations":)" + std::string(70, '[') + std::string(70, ']') + "}";
    try {
        oci::parse_manifest(deep, "application/vnd.oci.image.manifest.v1+json");
        FAIL("accepted");
    } catch (const oci::Error& error) {
        CHECK(error.code() == oci::ErrorCode::manifest_invalid);
    }
}

TEST_CASE("strings of one top-level array stream out without a document", "[json]") {
    std::vector<std::string> seen;
    auto collect = [&](std::string&& s) {
        seen.push_back(std::move(s));
        return true;
    };
    CHECK(oci::for_each_string_in(R"({"name":"x","tags":["a",["nested"],{"k":"v"},"b"],"other":["c"]})", "tags", 8,
                                  collect));
    CHECK(seen == std::vector<std::string>{"a", "b"});
    seen.clear();
    CHECK_FALSE(oci::for_each_string_in(R"(["a"])", "tags", 8, collect));
    CHECK(oci::for_each_string_in(R"({"tags":null})", "tags", 8, collect));
    CHECK(seen.empty());
    CHECK_FALSE(oci::for_each_string_in(R"({"tags":[[[[[[[[["a"]]]]]]]]]})", "tags", 4, collect));
}
