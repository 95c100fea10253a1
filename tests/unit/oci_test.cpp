#include <catch2/catch.hpp>

#include "berth/oci/digest.hpp"
#include "berth/oci/encoding.hpp"
#include "berth/oci/error.hpp"
#include "berth/oci/manifest.hpp"
#include "berth/oci/names.hpp"

using namespace berth::oci;

TEST_CASE("repository names follow the spec grammar") {
    for (auto name : {"a", "library/ubuntu", "a-b/c.d/e__f", "a--b", "x/y/z/0", "foo_bar", "a.b"})
        CHECK(valid_repository_name(name));
    for (auto name : {"", "A", "a/", "/a", "a//b", "-a", "a-", "a___b", "a..b", "a_.b", "ä", "a b", "a/../b", ".."})
        CHECK_FALSE(valid_repository_name(name));
    CHECK(valid_repository_name(std::string(255, 'a')));
    CHECK_FALSE(valid_repository_name(std::string(256, 'a')));
}

TEST_CASE("tags follow the spec grammar") {
    for (auto tag : {"latest", "v1.2.3", "_x", "A-b_c.d", "0"}) CHECK(valid_tag(tag));
    for (auto tag : {"", ".a", "-a", "a/b", "a:b", "a b"}) CHECK_FALSE(valid_tag(tag));
    CHECK(valid_tag(std::string(128, 'a')));
    CHECK_FALSE(valid_tag(std::string(129, 'a')));
}

TEST_CASE("digests parse exactly") {
    const std::string hex64(64, 'a'), hex128(128, 'b');
    auto sha256 = Digest::parse("sha256:" + hex64);
    REQUIRE(sha256);
    CHECK(sha256->algorithm() == DigestAlgorithm::sha256);
    CHECK(sha256->str() == "sha256:" + hex64);
    CHECK(Digest::parse("sha512:" + hex128));
    for (auto bad :
         {"sha256:" + hex64.substr(1), "sha256:" + hex64 + "a", "sha256:" + std::string(64, 'A'), "sha512:" + hex64,
          "md5:" + hex64.substr(32), "sha256" + hex64, ":" + hex64, "sha256:" + std::string(63, 'a') + "g"})
        CHECK_FALSE(Digest::parse(bad));
    CHECK_THROWS_AS(Digest::parse_or_throw("nope"), Error);
}

TEST_CASE("hashing matches known vectors, also incrementally") {
    CHECK(Digest::of(DigestAlgorithm::sha256, "").str() ==
          "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(Digest::of(DigestAlgorithm::sha256, "{}").str() ==
          "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a");
    Hasher hasher(DigestAlgorithm::sha512);
    hasher.update("hello ", 6);
    auto copy = hasher;  // a snapshot continues independently
    hasher.update("world", 5);
    CHECK(hasher.peek() == Digest::of(DigestAlgorithm::sha512, "hello world"));
    CHECK(copy.peek() == Digest::of(DigestAlgorithm::sha512, "hello "));
}

TEST_CASE("error bodies are the spec's JSON") {
    CHECK(error_json(ErrorCode::blob_unknown, "gone") == R"({"errors":[{"code":"BLOB_UNKNOWN","message":"gone"}]})");
    CHECK(http_status(ErrorCode::blob_unknown) == 404);
    CHECK(http_status(ErrorCode::upload_range_invalid) == 416);
    CHECK(http_status(ErrorCode::payload_too_large) == 413);
    CHECK(http_status(ErrorCode::too_many_requests) == 429);
    CHECK(http_status(ErrorCode::digest_invalid) == 400);
}

namespace {
const std::string layer_digest = "sha256:" + std::string(64, '1');
const std::string config_digest = "sha256:" + std::string(64, '2');

std::string image_manifest(const std::string& extra = "") {
    return R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",)"
           R"("config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":")" +
           config_digest +
           R"(","size":10},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":")" +
           layer_digest + R"(","size":20,"newUnspecifiedField":null}])" + extra + "}";
}
}  // namespace

TEST_CASE("image manifests expose config, layers and referrer fields") {
    auto parsed = parse_manifest(image_manifest(), "application/vnd.oci.image.manifest.v1+json");
    CHECK(parsed.kind == ManifestKind::image);
    REQUIRE(parsed.config);
    CHECK(parsed.config->digest.str() == config_digest);
    REQUIRE(parsed.layers.size() == 1);
    CHECK(parsed.layers[0].size == 20);
    CHECK(parsed.artifact_type == "application/vnd.oci.image.config.v1+json");
    CHECK_FALSE(parsed.subject);

    auto with_subject = parse_manifest(
        image_manifest(R"(,"subject":{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":")" +
                       layer_digest + R"(","size":5},"annotations":{"k":"v"},"artifactType":"x/y")"),
        "");
    REQUIRE(with_subject.subject);
    CHECK(with_subject.artifact_type == "x/y");
    auto descriptor = referrer_descriptor_json(with_subject, *Digest::parse(config_digest), 99);
    CHECK(descriptor.find(R"("artifactType":"x/y")") != std::string::npos);
    CHECK(descriptor.find(R"("annotations":{"k":"v"})") != std::string::npos);
}

TEST_CASE("layers an image may not redistribute are not the registry's to hold") {
    auto layer = [](const std::string& type, const std::string& digest_char, const std::string& urls = "") {
        return R"({"mediaType":")" + type + R"(","digest":"sha256:)" + std::string(64, digest_char[0]) +
               R"(","size":7)" + urls + "}";
    };
    auto body = R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",)"
                R"("config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":")" +
                config_digest + R"(","size":10},"layers":[)" +
                layer("application/vnd.oci.image.layer.v1.tar+gzip", "3") + "," +
                layer("application/vnd.oci.image.layer.nondistributable.v1.tar+gzip", "4") + "," +
                layer("application/vnd.oci.image.layer.nondistributable.v1.tar+zstd", "5",
                      R"(,"urls":["https://example.com/l"])") +
                "," +
                layer("application/vnd.docker.image.rootfs.foreign.diff.tar.gzip", "6",
                      R"(,"urls":["https://example.com/f"])") +
                "]}";
    auto parsed = parse_manifest(body, "");
    REQUIRE(parsed.layers.size() == 4);
    std::vector<std::string> local;
    for (auto& d : parsed.local_blobs()) local.push_back(d.digest.str());
    CHECK(local == std::vector<std::string>{config_digest, "sha256:" + std::string(64, '3')});
}

TEST_CASE("indexes list their manifests; untyped indexes have no artifactType") {
    auto parsed = parse_manifest(
        R"({"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":")" +
            layer_digest + R"(","size":3,"platform":{"os":"linux"}}]})",
        "application/vnd.oci.image.index.v1+json");
    CHECK(parsed.kind == ManifestKind::index);
    CHECK(parsed.manifests.size() == 1);
    CHECK(parsed.artifact_type.empty());
}

TEST_CASE("bad manifests are MANIFEST_INVALID") {
    auto invalid = [](const std::string& body, const std::string& type = "") {
        try {
            parse_manifest(body, type);
        } catch (const Error& error) {
            return error.code() == ErrorCode::manifest_invalid;
        }
        return false;
    };
    CHECK(invalid("not json"));
    CHECK(invalid("[]"));
    CHECK(invalid(std::string(100000, '[') + std::string(100000, ']')));
    CHECK(invalid(image_manifest(), "application/vnd.oci.image.index.v1+json"));  // mediaType mismatch
    CHECK(invalid(R"({"schemaVersion":1,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{}})"));
    CHECK(invalid(R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json"})"));
    CHECK(invalid(
        R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"a","digest":"sha256:zz","size":1}})"));
    CHECK(invalid(
        R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"a","digest":")" +
        config_digest + R"(","size":-1}})"));
    CHECK(invalid(R"({"schemaVersion":1,"name":"x"})", "application/vnd.docker.distribution.manifest.v1+prettyjws"));
    CHECK(invalid(image_manifest(R"(,"annotations":{"k":1})")));
    // Found by tests/fuzz/fuzz_manifest: a Content-Type that is not UTF-8 became
    // the media type, and rendering it as JSON threw (a 500, not a 400).
    CHECK(invalid(R"({"schemaVersion":2,"manifests":[]})", "application/vnd.\xc8oci.image.index.v1+json"));
}

TEST_CASE("repository globs: * stays in a component, ** crosses them") {
    CHECK(glob_match("team/*", "team/app"));
    CHECK_FALSE(glob_match("team/*", "team/app/sub"));
    CHECK(glob_match("team/**", "team/app/sub"));
    CHECK(glob_match("**", "anything/at/all"));
    CHECK(glob_match("*/base", "public/base"));
    CHECK_FALSE(glob_match("*/base", "a/public/base"));
    CHECK_FALSE(glob_match("team/*", "teams/app"));
    CHECK(glob_match("exact", "exact"));
    CHECK_FALSE(glob_match("exact", "exactly"));
    CHECK(matches_any({"a/*", "cache/**"}, "cache/x/y"));
    CHECK_FALSE(matches_any({"a/*", "cache/**"}, "b/x"));
    CHECK_FALSE(matches_any({}, "a"));
    CHECK(glob_match("**/x*y", "a/b/xzzy"));
    CHECK_FALSE(glob_match("**/x*y", "a/b/xz/y"));
    CHECK(glob_match("***", "a/b"));  // ** then *: any depth
    CHECK(glob_match("a**b", "a/x/b"));
    CHECK(glob_match("*", ""));
    CHECK_FALSE(glob_match("*a", ""));
    // A caller's glob (GET /_berth/v1/events?repository=) with many stars costs the product of the
    // lengths, not an exponential: this one never ended with backtracking.
    CHECK_FALSE(glob_match(std::string(255, '*') + "x", std::string(40, 'a')));
    CHECK_FALSE(glob_match(std::string(120, '*') + "/" + std::string(120, '*') + "x", std::string(60, 'a')));
}

TEST_CASE("hex and base64 round trip and refuse what is not theirs") {
    for (std::string bytes : std::vector<std::string>{"", "a", "ab", "abc", "abcd", std::string("\0\xff\x10", 3)}) {
        CHECK(unhex(hex(bytes)) == bytes);
        CHECK(base64_decode(base64(bytes)) == bytes);
        CHECK(base64url_decode(base64url(bytes)) == bytes);
    }
    CHECK(hex(std::string("\x01\xab", 2)) == "01ab");
    CHECK_FALSE(unhex("abc"));
    CHECK_FALSE(unhex("zz"));
    CHECK_FALSE(unhex("AB"));  // lower case only, as digests and cursors are written
    CHECK(base64("alice:pw") == "YWxpY2U6cHc=");
    CHECK(base64_decode("YWxpY2U6cHc=") == "alice:pw");
    CHECK(base64url(std::string("\xfb\xff", 2)) == "-_8");
    CHECK_FALSE(base64url_decode("ab+c"));
    CHECK_FALSE(base64_decode("ab-c"));
    CHECK(random_bytes(16).size() == 16);
    CHECK(random_bytes(16) != random_bytes(16));
    CHECK(random_hex(8).size() == 16);
}
