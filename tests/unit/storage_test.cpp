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

namespace {

// An image manifest (its blobs need not exist: the index does not check) with an optional subject.
std::string image_manifest(const std::string& subject = {}) {
    const std::string blob = "\"digest\":\"sha256:" + std::string(64, 'a') + "\",\"size\":1";
    std::string out = R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",)"
                      R"("config":{"mediaType":"application/vnd.oci.image.config.v1+json",)" + blob + "},"
                      R"("layers":[])";
    if (!subject.empty())
        out += R"(,"subject":{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":")" + subject +
               R"(","size":1})";
    return out + "}";
}

}  // namespace

TEST_CASE("meta store batches commit atomically with ordered log events") {
    TempDir dir;
    const auto bytes = image_manifest();
    const auto digest = berth::oci::Digest::of(berth::oci::DigestAlgorithm::sha256, bytes);
    const auto x = digest.str();
    {
        MetaStore meta(dir.path());
        CHECK(meta.log_stats().entries == 0);
        CHECK(meta.log_stats().oldest_ms == 0);
        MetaStore::Batch batch;
        batch.record_manifest("r", digest, berth::oci::parse_manifest(bytes, ""), bytes, {5, "a"});
        batch.record_tag("r", "b", x, {5, "a"});
        batch.record_tag("r", "a", x, {5, "a"});
        batch.record_tag("r2", "z", "sha256:y", {5, "a"});
        batch.record_tag("r", "c", "", {6, "a"});  // tombstone
        REQUIRE(batch.events().size() == 5);
        CHECK(batch.events()[0].type == Event::Type::manifest);
        CHECK(batch.events()[4].type == Event::Type::tag_deleted);
        CHECK(meta.commit(batch) == 5);
        CHECK(meta.log_head() == 5);
        const auto stats = meta.log_stats();
        CHECK(stats.entries == 5);
        CHECK(stats.oldest_ms == berth::storage::HybridClock::physical_ms(5));
        CHECK(stats.bytes > 0);
        CHECK(meta.tags("r", "", 10) == std::vector<std::string>{"a", "b"});
        CHECK(meta.tags("r", "a", 10) == std::vector<std::string>{"b"});
        CHECK(meta.tags("r", "", 1) == std::vector<std::string>{"a"});
        CHECK(meta.tags_of("r", x) == std::vector<std::string>{"a", "b"});
        auto manifest = meta.manifest("r", x);
        REQUIRE(manifest);
        CHECK(manifest->bytes == bytes);
        CHECK(manifest->stamp == Stamp{5, "a"});
        CHECK(meta.tag("r", "c")->deleted());
    }
    MetaStore reopened(dir.path());  // the log head survives a restart
    CHECK(reopened.log_head() == 5);
    auto log = reopened.read_log(4, 10);
    REQUIRE(log.size() == 1);
    CHECK(log[0].sequence == 5);
    auto event = Event::parse(log[0].event);
    REQUIRE(event);
    CHECK(event->type == Event::Type::tag_deleted);
    CHECK(event->tag == "c");
    CHECK(event->stamp == Stamp{6, "a"});
    CHECK_FALSE(Event::parse("{}"));
    CHECK_FALSE(Event::parse(R"({"type":"bogus","repo":"r","clock":1,"origin":"a"})"));
    CHECK(reopened.has_repository("r"));
    CHECK(reopened.has_repository("r2"));
    CHECK_FALSE(reopened.has_repository("q"));
}

TEST_CASE("a manifest's referrer entry comes and goes with the manifest") {
    TempDir dir;
    MetaStore meta(dir.path());
    const std::string subject = "sha256:" + std::string(64, 'b');
    const auto bytes = image_manifest(subject);
    const auto digest = berth::oci::Digest::of(berth::oci::DigestAlgorithm::sha256, bytes);
    MetaStore::Batch batch;
    batch.record_manifest("r", digest, berth::oci::parse_manifest(bytes, ""), bytes, {1, "a"});
    meta.commit(batch);
    auto record = meta.manifest("r", digest.str());
    REQUIRE(record);
    CHECK(record->subject == subject);
    REQUIRE(meta.referrers("r", subject).size() == 1);
    CHECK(meta.referrers("r", subject)[0].find(digest.str()) != std::string::npos);

    MetaStore::Batch deletion;
    deletion.tombstone_manifest("r", digest.str(), &*record, {2, "a"});
    meta.commit(deletion);
    auto tombstone = meta.manifest("r", digest.str());
    REQUIRE(tombstone);
    CHECK(tombstone->deleted);
    CHECK(tombstone->stamp == Stamp{2, "a"});
    CHECK(tombstone->subject == subject);  // kept, so a later delete finds nothing left to drop
    CHECK(meta.referrers("r", subject).empty());
    auto last = Event::parse(meta.read_log(1, 10).at(0).event);
    REQUIRE(last);
    CHECK(last->type == Event::Type::manifest_deleted);
}

TEST_CASE("cached tag list pages follow every tag write of their repository") {
    TempDir dir;
    MetaStore meta(dir.path());
    auto put = [&](const std::string& repo, const std::string& tag, const std::string& digest) {
        MetaStore::Batch batch;
        batch.record_tag(repo, tag, digest, {1, "a"});
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
    const auto manifest = image_manifest();
    const auto digest = berth::oci::Digest::of(berth::oci::DigestAlgorithm::sha256, manifest);
    MetaStore::Batch batch;
    batch.record_manifest("r", digest, berth::oci::parse_manifest(manifest, ""), bytes, {1, "x"});
    meta.commit(batch);
    CHECK(meta.manifest("r", digest.str())->bytes == bytes);
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
