// Namespace usage kept by MetaStore::commit: deduplicated bytes and repositories per namespace.
#include <rocksdb/db.h>

#include <catch2/catch.hpp>

#include "berth/oci/manifest.hpp"
#include "berth/oci/media_types.hpp"
#include "berth/oci/names.hpp"
#include "berth/storage/layout.hpp"
#include "berth/storage/meta_store.hpp"
#include "temp_dir.hpp"

using namespace berth;
using namespace berth::storage;

namespace {

std::string digest_of(const std::string& seed) { return oci::Digest::of(oci::DigestAlgorithm::sha256, seed).str(); }

void link(MetaStore& meta, const std::string& repo, const std::string& digest, std::uint64_t size,
          std::uint64_t clock = 1) {
    MetaStore::Batch batch;
    batch.record_link(repo, digest, {clock, "a"}, false, size);
    meta.commit(batch, MetaStore::Durability::none);
}

void unlink(MetaStore& meta, const std::string& repo, const std::string& digest, std::uint64_t clock = 2) {
    MetaStore::Batch batch;
    batch.record_link(repo, digest, {clock, "a"}, true, 0);
    meta.commit(batch, MetaStore::Durability::none);
}

NamespaceUsage usage(std::uint64_t bytes, std::uint64_t repositories) { return {bytes, repositories}; }

}  // namespace

TEST_CASE("a repository's namespace is its name up to the first slash", "[usage]") {
    CHECK(oci::namespace_of("team/app") == "team");
    CHECK(oci::namespace_of("team/a/b") == "team");
    CHECK(oci::namespace_of("alpine") == "alpine");
    CHECK(oci::namespace_of("docker.io/library/alpine") == "docker.io");
}

TEST_CASE("usage counts each blob once per namespace, whichever repositories link it", "[usage]") {
    TempDir dir;
    MetaStore meta(dir.path());
    const auto a = digest_of("a"), b = digest_of("b");
    CHECK(meta.usage("team") == usage(0, 0));

    link(meta, "team/one", a, 100);
    CHECK(meta.usage("team") == usage(100, 1));
    link(meta, "team/two", a, 100);  // the same blob in a second repository of the namespace
    CHECK(meta.usage("team") == usage(100, 2));
    link(meta, "team/one", a, 100, 3);  // linked again (a renewal): nothing changes
    CHECK(meta.usage("team") == usage(100, 2));
    link(meta, "team/two", b, 50);
    CHECK(meta.usage("team") == usage(150, 2));

    unlink(meta, "team/one", a, 4);
    CHECK(meta.usage("team") == usage(150, 2));  // team/two still links it
    unlink(meta, "team/two", a, 5);
    CHECK(meta.usage("team") == usage(50, 2));  // repositories stay, as in the catalog
    unlink(meta, "team/two", a, 6);             // a tombstone over a tombstone
    CHECK(meta.usage("team") == usage(50, 2));
    unlink(meta, "team/three", b, 7);  // never linked there
    CHECK(meta.usage("team") == usage(50, 3));
    link(meta, "team/one", a, 100, 8);  // linked again after its last unlink
    CHECK(meta.usage("team") == usage(150, 3));
}

TEST_CASE("namespaces are counted apart, by the first path component only", "[usage]") {
    TempDir dir;
    MetaStore meta(dir.path());
    const auto a = digest_of("a");
    link(meta, "team", a, 10);      // a repository without a slash is its own namespace
    link(meta, "team/x/y", a, 10);  // deeper names count in their first component
    link(meta, "team-b/x", a, 10);  // a namespace sharing a prefix is another namespace
    link(meta, "teamc", a, 10);
    CHECK(meta.usage("team") == usage(10, 2));
    CHECK(meta.usage("team-b") == usage(10, 1));
    CHECK(meta.usage("teamc") == usage(10, 1));

    auto all = meta.usages("", 100);
    REQUIRE(all.size() == 3);
    CHECK(all[0].first == "team");
    CHECK(all[1].first == "team-b");
    CHECK(all[2].first == "teamc");
    auto page = meta.usages("team", 1);
    REQUIRE(page.size() == 1);
    CHECK(page[0].first == "team-b");
    CHECK(page[0].second == usage(10, 1));
    CHECK(meta.usages("teamc", 10).empty());
}

TEST_CASE("one batch's writes are tallied in order, and usage_change previews a commit", "[usage]") {
    TempDir dir;
    MetaStore meta(dir.path());
    const auto a = digest_of("a"), b = digest_of("b");
    link(meta, "ns/r", a, 100);

    MetaStore::Batch batch;
    batch.record_link("ns/r", a, {5, "a"}, true, 0);     // unlinked...
    batch.record_link("ns/s", a, {5, "a"}, false, 100);  // ...and linked elsewhere in the same batch
    batch.record_link("ns/s", b, {5, "a"}, false, 7);
    batch.record_link("other/r", b, {5, "a"}, false, 7);
    auto change = meta.usage_change(batch);
    REQUIRE(change.size() == 2);
    CHECK(change[0].ns == "ns");
    CHECK(change[0].before == usage(100, 1));
    CHECK(change[0].after == usage(107, 2));
    CHECK(change[1].ns == "other");
    CHECK(change[1].before == usage(0, 0));
    CHECK(change[1].after == usage(7, 1));
    CHECK(meta.usage("ns") == usage(100, 1));  // only a preview

    meta.commit(batch, MetaStore::Durability::none);
    CHECK(meta.usage("ns") == usage(107, 2));
    CHECK(meta.usage("other") == usage(7, 1));

    // Tags and manifests bring their repository with them: counted too.
    MetaStore::Batch tag;
    tag.record_tag("ns/t", "latest", a, {6, "a"});
    CHECK(meta.usage_change(tag).at(0).after == usage(107, 3));
    meta.commit(tag, MetaStore::Durability::none);
    CHECK(meta.usage("ns") == usage(107, 3));
}

TEST_CASE("a store without usage is counted once, from its links and repositories", "[usage]") {
    TempDir dir;
    const auto a = digest_of("a"), b = digest_of("b"), gone = digest_of("gone");
    {
        MetaStore meta(dir.path());
        link(meta, "ns/r", a, 100);
        link(meta, "ns/s", a, 100);
        link(meta, "ns/s", b, 30);
        link(meta, "ns/t", gone, 999);
        unlink(meta, "ns/s", b);
        link(meta, "x/r", b, 30);
    }
    {
        // What an older berth left: no usage column family, no usage_counted setting.
        rocksdb::DB* raw = nullptr;
        std::vector<rocksdb::ColumnFamilyDescriptor> families;
        for (auto name : layout::column_families) families.emplace_back(name, rocksdb::ColumnFamilyOptions());
        std::vector<rocksdb::ColumnFamilyHandle*> handles;
        REQUIRE(rocksdb::DB::Open(rocksdb::DBOptions(), dir.path().string(), families, &handles, &raw).ok());
        REQUIRE(raw->DropColumnFamily(handles[layout::cf_usage]).ok());
        for (auto* handle : handles) raw->DestroyColumnFamilyHandle(handle);
        delete raw;
    }
    {
        // Read-only (`berth gc --dry-run`) opens it as it is, and sees no usage.
        MetaStore meta(dir.path(), MetaStore::Mode::read_only);
        CHECK(meta.usage("ns") == usage(0, 0));
        CHECK(meta.usages("", 10).empty());
    }
    MetaStore meta(dir.path());
    CHECK(meta.usage("ns") == usage(0, 0));
    std::vector<std::string> asked;
    auto sizes = [&](const std::string& digest) -> std::uint64_t {
        asked.push_back(digest);
        return digest == a ? 100 : digest == b ? 30 : 0;  // `gone` lost its file
    };
    meta.count_usage(sizes);
    CHECK(meta.usage("ns") == usage(100, 3));
    CHECK(meta.usage("x") == usage(30, 1));
    CHECK(meta.setting(layout::setting::usage_counted) == std::string(layout::usage_count_version));
    CHECK_FALSE(asked.empty());

    asked.clear();
    meta.count_usage(sizes);  // counted already: not again
    CHECK(asked.empty());
    link(meta, "ns/t", b, 30, 9);  // and commits go on from the count
    CHECK(meta.usage("ns") == usage(130, 3));
}

TEST_CASE("counting starts over from nothing, whatever usage the store held", "[usage]") {
    TempDir dir;
    MetaStore meta(dir.path());
    const auto a = digest_of("a");
    link(meta, "ns/r", a, 100);
    link(meta, "ns/s", a, 100);
    // Kept by the commits already, not yet marked counted (as after a count cut short).
    meta.count_usage([](const std::string&) -> std::uint64_t { return 100; });
    CHECK(meta.usage("ns") == usage(100, 2));
    unlink(meta, "ns/r", a, 5);
    unlink(meta, "ns/s", a, 6);
    CHECK(meta.usage("ns") == usage(0, 2));
    CHECK(meta.usages("", 10).size() == 1);
}

namespace {

// An image manifest with one layer, distinct per seed.
void push(MetaStore& meta, const std::string& repo, const std::string& tag, const std::string& seed,
          std::uint64_t clock) {
    const std::string bytes =
        R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",)"
        R"("config":{"mediaType":"application/vnd.oci.image.config.v1+json","size":2,"digest":")" +
        digest_of("config") +
        R"("},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar",)"
        R"("size":10,"digest":")" +
        digest_of(seed) + R"("}],"annotations":{"s":")" + seed + R"("}})";
    const auto digest = oci::Digest::of(oci::DigestAlgorithm::sha256, bytes);
    MetaStore::Batch batch;
    batch.record_link(repo, digest_of("config"), {clock, "a"}, false, 2);
    batch.record_link(repo, digest_of(seed), {clock, "a"}, false, 10);
    batch.record_manifest(repo, digest, oci::parse_manifest(bytes, std::string(oci::media_type::oci_manifest)), bytes,
                          {clock, "a"});
    batch.record_tag(repo, tag, digest.str(), {clock, "a"});
    meta.commit(batch, MetaStore::Durability::none);
}

}  // namespace

TEST_CASE("a repository's totals follow its links, tags and manifests, and a recount finds the same", "[usage]") {
    TempDir dir;
    MetaStore meta(dir.path());
    push(meta, "ns/app", "1", "one", 100 << 16);
    push(meta, "ns/app", "2", "two", 200 << 16);
    push(meta, "ns/app", "1", "three", 150 << 16);  // the tag moves; the first manifest stays, untagged
    push(meta, "ns/other", "1", "one", 120 << 16);
    const RepositoryUsage app{2 + 10 * 3, 2, 3, 200 << 16};
    CHECK(meta.repository_usage("ns/app") == app);
    CHECK(meta.repository_usage("ns/other") == RepositoryUsage{12, 1, 1, 120 << 16});
    CHECK(meta.usage("ns").bytes == 2 + 10 * 3);  // "one" counted once for the namespace

    MetaStore::Batch gone;
    gone.record_tag("ns/app", "2", "", {300 << 16, "a"});
    gone.record_link("ns/app", digest_of("two"), {300 << 16, "a"}, true, 0);
    meta.commit(gone, MetaStore::Durability::none);
    const RepositoryUsage after{2 + 10 * 2, 1, 3, 200 << 16};
    CHECK(meta.repository_usage("ns/app") == after);
    CHECK(meta.repository_usage("ns/none") == RepositoryUsage{});

    meta.put_setting(layout::setting::usage_counted, "1");  // what an older berth counted
    meta.count_usage(
        [&](const std::string& digest) -> std::uint64_t { return digest == digest_of("config") ? 2 : 10; });
    // A count sees the live tags and manifests: the untagged manifest of "2" is still there.
    CHECK(meta.repository_usage("ns/app") == after);
    CHECK(meta.repository_usage("ns/other") == RepositoryUsage{12, 1, 1, 120 << 16});
}
