#include <catch2/catch.hpp>
#include <fstream>

#include "berth/storage/blob_store.hpp"
#include "berth/storage/hybrid_clock.hpp"
#include "berth/storage/meta_store.hpp"
#include "temp_dir.hpp"

using namespace berth;
using namespace berth::storage;

TEST_CASE("blob store commits scratch files by digest and keeps the first copy") {
    TempDir dir;
    BlobStore blobs(dir.path());
    auto digest = oci::Digest::of(oci::DigestAlgorithm::sha256, "hello");
    CHECK_FALSE(blobs.size(digest));
    auto scratch = blobs.scratch_dir() / "one";
    std::ofstream(scratch) << "hello";
    blobs.commit(scratch, digest);
    CHECK(blobs.size(digest) == 5u);
    CHECK(blobs.path(digest).string().find("/blobs/sha256/" + digest.hex().substr(0, 2) + "/") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(scratch));

    std::ofstream(scratch) << "hello";
    blobs.commit(scratch, digest);  // already there: the scratch file is dropped
    CHECK_FALSE(std::filesystem::exists(scratch));
    CHECK(blobs.remove(digest));
    CHECK_FALSE(blobs.size(digest));
}

TEST_CASE("meta store batches commit atomically with ordered log events") {
    TempDir dir;
    {
        MetaStore meta(dir.path());
        MetaStore::Batch batch;
        batch.add_repository("r");
        batch.put_manifest("r", "sha256:x", {"type", "", "", "{bytes}", {5, "a"}, false});
        batch.put_tag("r", "b", {"sha256:x", {5, "a"}});
        batch.put_tag("r", "a", {"sha256:x", {5, "a"}});
        batch.put_tag("r", "c", {"", {6, "a"}});  // tombstone
        batch.put_tag("r2", "z", {"sha256:y", {5, "a"}});
        batch.log({Event::Type::tag, "r", "sha256:x", "a", {5, "a"}});
        batch.log({Event::Type::tag_deleted, "r", "", "c", {6, "a"}});
        CHECK(meta.commit(batch) == 2);
        CHECK(meta.log_head() == 2);
        CHECK(meta.tags("r", "", 10) == std::vector<std::string>{"a", "b"});
        CHECK(meta.tags("r", "a", 10) == std::vector<std::string>{"b"});
        CHECK(meta.tags("r", "", 1) == std::vector<std::string>{"a"});
        CHECK(meta.tags_of("r", "sha256:x") == std::vector<std::string>{"a", "b"});
        auto manifest = meta.manifest("r", "sha256:x");
        REQUIRE(manifest);
        CHECK(manifest->bytes == "{bytes}");
        CHECK(manifest->stamp == Stamp{5, "a"});
        CHECK(meta.tag("r", "c")->deleted());
    }
    MetaStore reopened(dir.path());  // the log head survives a restart
    CHECK(reopened.log_head() == 2);
    auto log = reopened.read_log(1, 10);
    REQUIRE(log.size() == 1);
    CHECK(log[0].sequence == 2);
    auto event = Event::parse(log[0].event);
    REQUIRE(event);
    CHECK(event->type == Event::Type::tag_deleted);
    CHECK(event->tag == "c");
    CHECK(event->stamp == Stamp{6, "a"});
    CHECK_FALSE(Event::parse("{}"));
    CHECK_FALSE(Event::parse(R"({"type":"bogus","repo":"r","clock":1,"origin":"a"})"));
    CHECK(reopened.has_repository("r"));
    CHECK_FALSE(reopened.has_repository("q"));
}

TEST_CASE("cached tag list pages follow every tag write of their repository") {
    TempDir dir;
    MetaStore meta(dir.path());
    auto put = [&](const std::string& repo, const std::string& tag, const std::string& digest) {
        MetaStore::Batch batch;
        batch.put_tag(repo, tag, {digest, {1, "a"}});
        meta.commit(batch, MetaStore::Durability::none);
    };
    put("r", "a", "sha256:x");
    put("r/sub", "a", "sha256:x");  // a repository whose name extends r's
    CHECK(meta.tags("r", "", 10) == std::vector<std::string>{"a"});
    CHECK(meta.tags("r/sub", "", 10) == std::vector<std::string>{"a"});
    put("r", "b", "sha256:x");
    CHECK(meta.tags("r", "", 10) == std::vector<std::string>{"a", "b"});
    CHECK(meta.tags("r", "a", 10) == std::vector<std::string>{"b"});
    CHECK(meta.tags("r/sub", "", 10) == std::vector<std::string>{"a"});
    put("r", "a", "");  // tombstone
    CHECK(meta.tags("r", "", 10) == std::vector<std::string>{"b"});
    CHECK(meta.tags("r", "", 1) == std::vector<std::string>{"b"});
    put("r/sub", "c", "sha256:x");
    CHECK(meta.tags("r", "", 10) == std::vector<std::string>{"b"});
    CHECK(meta.tags("r/sub", "", 10) == std::vector<std::string>{"a", "c"});
}

TEST_CASE("manifest bytes survive NULs and arbitrary content") {
    TempDir dir;
    MetaStore meta(dir.path());
    std::string bytes("a\0b\0c", 5);
    MetaStore::Batch batch;
    batch.put_manifest("r", "d", {"t", "s", "{}", bytes, {1, "x"}, false});
    meta.commit(batch);
    CHECK(meta.manifest("r", "d")->bytes == bytes);
}

TEST_CASE("hybrid clock never goes backwards and moves past what it observes") {
    std::uint64_t wall = 1000;
    HybridClock clock([&] { return wall; });
    auto a = clock.now();
    CHECK(HybridClock::physical_ms(a) == 1000);
    wall = 900;  // the wall clock steps back
    auto b = clock.now();
    CHECK(b > a);
    clock.observe(5000ull << 16);
    CHECK(clock.now() > (5000ull << 16));
}
