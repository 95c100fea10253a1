// storage.blobs: the files store by default; an s3 store's keys checked at start.
#include <catch2/catch.hpp>
#include <fstream>

#include "berth/config/config.hpp"
#include "temp_dir.hpp"

using namespace berth::config;

namespace {

std::string error_of(const std::string& text, const std::filesystem::path& base = ".") {
    try {
        parse_config(text, base);
    } catch (const ConfigError& error) {
        return error.what();
    }
    return "";
}

}  // namespace

TEST_CASE("storage.blobs chooses the files store or a bucket") {
    CHECK_FALSE(parse_config("{}").s3_blobs);
    CHECK_FALSE(parse_config(R"({"storage":{"blobs":{"type":"files"}}})").s3_blobs);

    TempDir dir;
    std::ofstream(dir.path() / "access") << "AKID\n";
    std::ofstream(dir.path() / "secret") << "s3cr3t-key\n";
    const std::string keys = R"("access_key_file":"access","secret_key_file":"secret")";
    auto config = parse_config(R"({"gc":{"grace_seconds":600},"storage":{"blobs":{"type":"s3",
        "endpoint":"https://rgw.example:7480","bucket":"berth","prefix":"prod/",)" +
                                   keys + R"(,"part_size_mib":8,"parallel_parts":3,"cache_bytes":0}}})",
                               dir.path());
    REQUIRE(config.s3_blobs);
    CHECK(config.s3_blobs->bucket.access_key == "AKID");
    CHECK(config.s3_blobs->bucket.secret_key == "s3cr3t-key");
    CHECK(config.s3_blobs->bucket.part_size == 8u << 20);
    CHECK(config.s3_blobs->parallel_parts == 3);
    CHECK(config.s3_blobs->cache_bytes == 0);
    CHECK(config.s3_blobs->prefix == "prod/");
    CHECK(config.s3_blobs->renew_after == std::chrono::seconds(300));  // half the GC grace
    CHECK(config.s3_blobs->redirect_for.count() == 0);                 // no redirects unless asked
    const auto redirecting =
        parse_config(R"({"storage":{"blobs":{"type":"s3","endpoint":"http://h:1","bucket":"bkt",)" + keys +
                         R"(,"redirect":true,"redirect_seconds":60}}})",
                     dir.path());
    CHECK(redirecting.s3_blobs->redirect_for == std::chrono::seconds(60));

    const auto s3 = [&](const std::string& more) {
        return error_of(R"({"storage":{"blobs":{"type":"s3","endpoint":"http://127.0.0.1:7480","bucket":"berth",)" +
                            keys + more + "}}}",
                        dir.path());
    };
    CHECK(s3("") == "");
    // Backups list a bucket's objects beside the index (docs/storage.md).
    std::ofstream(dir.path() / "backup-secret") << "a-secret-of-sixteen-or-more\n";
    CHECK(error_of(R"({"backup":{"target":"/backups","secret_file":"backup-secret"},"storage":{"blobs":{"type":"s3",
        "endpoint":"http://127.0.0.1:7480","bucket":"berth",)" +
                       keys + "}}}",
                   dir.path()) == "");
    CHECK(error_of(R"({"storage":{"blobs":{"type":"nfs"}}})") == R"(storage.blobs.type is "files" or "s3")");
    CHECK(error_of(R"({"storage":{"blobs":{"type":"files","bucket":"x"}}})") == "unknown key storage.blobs.bucket");
    CHECK(s3(R"(,"prefix":"noslash")") == "storage.blobs.prefix must end with / (or be empty)");
    CHECK(s3(R"(,"part_size_mib":4)").find("storage.blobs.part_size_mib") == 0);
    CHECK(s3(R"(,"parallel_parts":0)").find("storage.blobs.parallel_parts") == 0);
    CHECK(s3(R"(,"abandoned_upload_seconds":5)").find("storage.blobs.abandoned_upload_seconds") == 0);
    CHECK(s3(R"(,"redirect":"yes")").find("storage.blobs.redirect") == 0);
    CHECK(s3(R"(,"redirect":true,"redirect_seconds":0)") == "storage.blobs.redirect_seconds is 1 to 3600");
    CHECK(error_of(R"({"storage":{"blobs":{"type":"s3","endpoint":"http://h","bucket":"b"}}})") ==
          "storage.blobs: an s3 store needs access_key_file and secret_key_file");
    CHECK(error_of(R"({"storage":{"blobs":{"type":"s3","endpoint":"http://h","bucket":"B_x",)" + keys + "}}}",
                   dir.path())
              .find("storage.blobs: ") == 0);  // S3's rules for a bucket's name
}
