// Tar archives and carried names (transfer/).
#include <catch2/catch.hpp>
#include <fstream>

#include "temp_dir.hpp"
#include "transfer/files.hpp"
#include "transfer/names.hpp"
#include "transfer/tar.hpp"

using namespace berth::transfer;

TEST_CASE("a tar written entry by entry is indexed and read back, long names too") {
    TempDir dir;
    const auto archive = dir.path() / "a.tar";
    const std::string long_name = "blobs/sha256/" + std::string(120, 'a');
    {
        TarWriter tar(archive);
        for (auto& [name, content] : {std::pair<std::string, std::string>{"index.json", "{}"},
                                      {long_name, std::string(1000, 'x')},
                                      {"empty", ""}}) {
            tar.begin(name, content.size());
            tar.write(content.data(), content.size());
        }
        tar.finish();
    }
    CHECK(std::filesystem::file_size(archive) % 512 == 0);
    auto files = Files::open(archive);
    CHECK(files->read("index.json", 100) == "{}");
    CHECK(files->read("./" + long_name, 2000) == std::string(1000, 'x'));
    CHECK(files->read("empty", 10) == "");
    CHECK_FALSE(files->read("missing", 10));
    CHECK_THROWS(files->read(long_name, 10));  // larger than asked for

    std::ofstream(dir.path() / "junk.tar") << std::string(1024, 'j');
    CHECK_THROWS_WITH(Files::open(dir.path() / "junk.tar"), Catch::Contains("not a tar archive"));
}

TEST_CASE("carried names: full references, bare tags, hosts with ports, and what berth cannot store") {
    auto name = parse_image_name("airgap/app:1.0");
    REQUIRE(name);
    CHECK(name->repository == "airgap/app");
    CHECK(name->tag == "1.0");
    CHECK(parse_image_name("docker.io/library/nginx:1.25")->repository == "docker.io/library/nginx");
    CHECK(parse_image_name("localhost:5000/app:2")->repository == "localhost/app");
    CHECK(parse_image_name("1.0")->repository.empty());
    CHECK(parse_image_name("1.0")->tag == "1.0");
    auto by_digest = parse_image_name("app/x@sha256:" + std::string(64, 'a'));
    CHECK(by_digest->repository == "app/x");
    CHECK(by_digest->tag.empty());
    CHECK_FALSE(parse_image_name("Upper/Case:1"));
    CHECK_FALSE(parse_image_name("app:bad tag"));
    CHECK(with_prefix("site", "app") == "site/app");
}
