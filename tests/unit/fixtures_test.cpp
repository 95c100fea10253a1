// The shared fixtures (fixtures.hpp) do what the tests built on them assume: manifests byte for
// byte as written, blobs stored under their digests, clocks and pulls wired as asked.
#include <catch2/catch.hpp>

#include "berth/oci/manifest.hpp"
#include "fixtures.hpp"

using namespace berth;

TEST_CASE("manifest bodies are written byte for byte, and parse as what they say", "[fixtures]") {
    const auto config = test::sha256("config-1"), layer = test::sha256("layer-1");
    const auto image = test::image_manifest(config, 8, layer, 7);
    CHECK(image == R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",)"
                   R"("config":{"mediaType":"application/vnd.example.config","digest":")" +
                       config.str() + R"(","size":8},"layers":[{"mediaType":"application/octet-stream","digest":")" +
                       layer.str() + R"(","size":7}]})");
    auto parsed = oci::parse_manifest(test::image_manifest(config, 8, layer, 7, test::digest_of(image)), "");
    REQUIRE(parsed.config);
    CHECK(parsed.config->digest == config);
    REQUIRE(parsed.layers.size() == 1);
    CHECK(parsed.layers[0].size == 7);
    REQUIRE(parsed.subject);
    CHECK(parsed.subject->digest.str() == test::digest_of(image));

    const auto index = test::index_manifest(test::digest_of(image), image.size());
    CHECK(index == R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[)"
                   R"({"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":")" +
                       test::digest_of(image) + R"(","size":)" + std::to_string(image.size()) + "}]}");
    CHECK(oci::parse_manifest(index, "").manifests.size() == 1);
    CHECK(test::index_manifest({}) ==
          R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]})");
}

TEST_CASE("a store fixture's clock follows now_ms; its blobs are stored under their digests", "[fixtures]") {
    test::StoreFixture f(5'000);
    CHECK(storage::HybridClock::physical_ms(f.clock.now()) == 5'000);
    f.now_ms = 9'000;
    CHECK(storage::HybridClock::physical_ms(f.clock.now()) == 9'000);
    CHECK(f.wall()() == 9'000);
    auto digest = f.add_blob("bytes");
    CHECK(digest == test::sha256("bytes"));
    CHECK(test::read_file(test::blob_path(f.dir.path(), digest)) == "bytes");
    CHECK(f.tags("r").empty());
}

TEST_CASE("a registry fixture pushes images, referrers and indexes as clients do", "[fixtures]") {
    test::RegistryFixture f({.note_pulls = true});
    f.check_pushes = true;
    const auto image = f.push("r", "v1", "1");
    CHECK(f.reg.get_manifest("r", "v1").bytes ==
          test::image_manifest(test::sha256("config-1"), 8, test::sha256("layer-1"), 7));
    CHECK(f.pulls.last("r", "v1"));  // noted: note_pulls gave the registry the store's PullTimes
    CHECK(f.reg.stat_blob("r", test::digest_of("layer-1")).size == 7);

    const auto referrer = f.push("r", "", "sig", image);
    CHECK(f.tags("r") == std::vector<std::string>{"v1"});
    CHECK(f.live("r", referrer));
    CHECK(f.reg.referrers("r", image, "").find(referrer) != std::string::npos);

    const auto index = f.push_index("r", "multi", {image});
    CHECK(f.reg.get_manifest("r", index).bytes ==
          test::index_manifest(image, f.meta.manifest("r", image)->bytes.size()));
    CHECK(f.tags("r") == std::vector<std::string>{"multi", "v1"});

    test::RegistryFixture quiet;
    quiet.push("r", "v1", "1");
    quiet.reg.get_manifest("r", "v1");
    CHECK_FALSE(quiet.pulls.last("r", "v1"));  // no pulls noted unless asked
    CHECK(quiet.reg.options().replica_id == "test");
    CHECK(storage::HybridClock::physical_ms(quiet.clock.now()) == test::wall_ms);
}
