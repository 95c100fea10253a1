#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <thread>
#include <vector>

#include "berth/storage/blob_hash.hpp"
#include "berth/storage/blob_store.hpp"
#include "berth/storage/layout.hpp"
#include "berth/storage/hybrid_clock.hpp"
#include "berth/storage/meta_store.hpp"
#include "storage/group_sync.hpp"
#include "temp_dir.hpp"

using namespace berth;
using namespace berth::storage;

TEST_CASE("blob store commits written blobs by digest and keeps the first copy") {
    TempDir dir;
    FileBlobStore blobs(dir.path());
    auto digest = oci::Digest::of(oci::DigestAlgorithm::sha256, "hello");
    CHECK_FALSE(blobs.size(digest));
    auto scratch_files = [&] {
        return std::distance(std::filesystem::directory_iterator(layout::scratch_dir(dir.path())), {});
    };
    {
        auto writer = blobs.write(oci::DigestAlgorithm::sha256);
        writer.write("hello", 5);
        CHECK(scratch_files() == 1);
        CHECK(writer.commit(digest) == digest);
    }
    CHECK(blobs.size(digest) == 5u);
    CHECK(std::filesystem::exists(layout::blob_file(layout::blobs_dir(dir.path()), digest)));
    CHECK(scratch_files() == 0);
    CHECK(blobs.read(digest, 5) == "hello");
    CHECK_FALSE(blobs.read(digest, 4));  // over the limit

    {
        auto writer = blobs.write(oci::DigestAlgorithm::sha256);
        writer.write("hello", 5);
        writer.commit();  // already there: the scratch file is dropped
    }
    CHECK(scratch_files() == 0);
    {
        auto writer = blobs.write(oci::DigestAlgorithm::sha256);
        writer.write("hellO", 5);
        CHECK_THROWS_AS(writer.commit(digest), DigestMismatch);
    }
    CHECK(scratch_files() == 0);  // a writer dropped uncommitted leaves nothing
    {
        auto writer = blobs.write(oci::DigestAlgorithm::sha256, {.expected_size = 3, .max_bytes = 4});
        CHECK_THROWS(writer.write("hello", 5));  // past its announced size
        CHECK_THROWS(writer.commit());           // short of it
    }
    CHECK_THROWS(blobs.write(oci::DigestAlgorithm::sha256, {.expected_size = 5, .max_bytes = 4}));
    CHECK(blobs.remove(digest));
    CHECK_FALSE(blobs.size(digest));
}

TEST_CASE("blob store makes every prefix folder at start, and again if one is removed under it") {
    TempDir dir;
    FileBlobStore blobs(dir.path());
    const auto tree = layout::blobs_dir(dir.path());
    for (const char* algorithm : {"sha256", "sha512"}) {
        CHECK(std::distance(std::filesystem::directory_iterator(tree / algorithm), {}) == 256);
        CHECK(std::filesystem::is_directory(tree / algorithm / "00"));
        CHECK(std::filesystem::is_directory(tree / algorithm / "ff"));
    }
    CHECK_FALSE(FileBlobStore::holds_blobs(dir.path()));
    for (auto algorithm : {oci::DigestAlgorithm::sha256, oci::DigestAlgorithm::sha512}) {
        auto digest = oci::Digest::of(algorithm, "hello");
        std::filesystem::remove_all(layout::blob_file(tree, digest).parent_path().parent_path());
        auto writer = blobs.write(algorithm);
        writer.write("hello", 5);
        CHECK(writer.commit(digest) == digest);
        CHECK(blobs.read(digest, 5) == "hello");
    }
    FileBlobStore again(dir.path());  // a second start over a store that has them
    CHECK(again.size(oci::Digest::of(oci::DigestAlgorithm::sha512, "hello")) == 5u);
}

TEST_CASE("commits racing into a removed prefix folder all land") {
    TempDir dir;
    FileBlobStore blobs(dir.path());
    // Eight blobs of one prefix, committed at once after the whole sha256 tree is gone: one
    // remakes it while the others wait, and none is refused for a folder another just made.
    std::vector<std::string> contents;
    std::string prefix;
    for (int i = 0; contents.size() < 8; ++i) {
        auto text = "blob " + std::to_string(i);
        auto hex = oci::Digest::of(oci::DigestAlgorithm::sha256, text).hex().substr(0, 2);
        if (prefix.empty()) prefix = hex;
        if (hex == prefix) contents.push_back(text);
    }
    std::filesystem::remove_all(layout::blobs_dir(dir.path()) / "sha256");
    std::vector<std::thread> threads;
    std::atomic<int> landed = 0;
    for (auto& text : contents)
        threads.emplace_back([&blobs, &landed, text] {
            auto writer = blobs.write(oci::DigestAlgorithm::sha256);
            writer.write(text.data(), text.size());
            try {
                writer.commit(oci::Digest::of(oci::DigestAlgorithm::sha256, text));
                ++landed;
            } catch (const std::exception&) {}
        });
    for (auto& thread : threads) thread.join();
    CHECK(landed == 8);
    for (auto& text : contents) CHECK(blobs.read(oci::Digest::of(oci::DigestAlgorithm::sha256, text), 100) == text);
}

TEST_CASE("after a failed remake of the tree, no commit lands until one succeeds") {
    TempDir dir;
    FileBlobStore blobs(dir.path());
    const auto tree = layout::blobs_dir(dir.path());
    auto commit = [&](const std::string& text) {
        auto writer = blobs.write(oci::DigestAlgorithm::sha256);
        writer.write(text.data(), text.size());
        return writer.commit(oci::Digest::of(oci::DigestAlgorithm::sha256, text));
    };
    // A folder removed under the store, and a remake that fails half-way (sha512 is a file): the
    // sha256 folders are made again, but their entries were never fsynced.
    std::filesystem::remove(
        layout::blob_file(tree, oci::Digest::of(oci::DigestAlgorithm::sha256, "first")).parent_path());
    std::filesystem::remove_all(tree / "sha512");
    { std::ofstream(tree / "sha512") << "in the way"; }
    CHECK_THROWS(commit("first"));
    CHECK_THROWS(commit("second"));  // its folder is there, its entry perhaps not on disk
    std::filesystem::remove(tree / "sha512");
    CHECK(commit("second") == oci::Digest::of(oci::DigestAlgorithm::sha256, "second"));
    CHECK(commit("first") == oci::Digest::of(oci::DigestAlgorithm::sha256, "first"));
    CHECK(std::filesystem::is_directory(tree / "sha512" / "ff"));
}

TEST_CASE("a store opened beside a server leaves its scratch files and makes its tree only to commit") {
    TempDir dir;
    const auto scratch = layout::scratch_dir(dir.path());
    std::filesystem::create_directories(scratch);
    const auto fetch = layout::fetch_file(scratch);
    { std::ofstream(fetch) << "a server's copy from a peer, in progress"; }
    FileBlobStore beside(dir.path(), StoreUse::beside);
    CHECK(std::filesystem::exists(fetch));
    CHECK_FALSE(std::filesystem::exists(layout::blobs_dir(dir.path())));
    auto digest = oci::Digest::of(oci::DigestAlgorithm::sha256, "imported");
    CHECK_FALSE(beside.size(digest));
    auto writer = beside.write(oci::DigestAlgorithm::sha256);
    writer.write("imported", 8);
    CHECK(writer.commit(digest) == digest);
    CHECK(beside.read(digest, 8) == "imported");
    CHECK(std::distance(std::filesystem::directory_iterator(layout::blobs_dir(dir.path()) / "sha256"), {}) == 256);
    FileBlobStore owner(dir.path());
    CHECK_FALSE(std::filesystem::exists(fetch));  // its owner's start clears it
}

TEST_CASE("the one hash reads a blob whole and can stop early") {
    TempDir dir;
    FileBlobStore blobs(dir.path());
    const std::string bytes(3 << 20, 'x');
    auto writer = blobs.write(oci::DigestAlgorithm::sha256);
    writer.write(bytes.data(), bytes.size());
    auto digest = writer.commit();
    auto blob = blobs.open(digest);
    REQUIRE(blob);
    auto hashed = hash(*blob, oci::DigestAlgorithm::sha256);
    REQUIRE(hashed);
    CHECK(hashed->digest == digest);
    CHECK(hashed->size == bytes.size());
    int pieces = 0;
    CHECK_FALSE(hash(*blob, oci::DigestAlgorithm::sha256, [&](const char*, std::size_t) { return ++pieces < 2; }));
    CHECK(pieces == 2);
    std::string all;
    read_all(*blob, [&](const char* data, std::size_t n) { all.append(data, n); });
    CHECK(all == bytes);
}

namespace {

// An image manifest (its blobs need not exist: the index does not check) with an optional subject.
std::string image_manifest(const std::string& subject = {}) {
    const std::string blob = "\"digest\":\"sha256:" + std::string(64, 'a') + "\",\"size\":1";
    std::string out = R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",)"
                      R"("config":{"mediaType":"application/vnd.oci.image.config.v1+json",)" +
                      blob +
                      "},"
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

TEST_CASE("a metadata sync fsyncs only what is new") {
    TempDir dir;
    MetaStore meta(dir.path());
    MetaStore::Batch batch;
    batch.record_tag("r", "t", "sha256:x", {1, "a"});
    meta.commit(batch, MetaStore::Durability::deferred);
    meta.sync();
    CHECK(meta.wal_syncs() == 1);
    meta.sync();  // nothing written since: no fsync
    CHECK(meta.wal_syncs() == 1);
    meta.put_setting("k", "v", MetaStore::Durability::none);  // any write, not only commits, needs one
    meta.sync();
    CHECK(meta.wal_syncs() == 2);
}

TEST_CASE("group sync: concurrent callers share fsyncs, none returns before an fsync that began after its write") {
    std::atomic<std::uint64_t> position{0};  // the log's newest write
    std::atomic<std::uint64_t> durable{0};   // what completed fsyncs covered
    std::atomic<int> in_flight{0}, overlapped{0};
    berth::storage::GroupSync group([&] { return position.load(); },
                                    [&] {
                                        const auto covers = position.load();
                                        if (++in_flight > 1) ++overlapped;
                                        std::this_thread::sleep_for(std::chrono::microseconds(300));
                                        --in_flight;
                                        auto seen = durable.load();
                                        while (seen < covers && !durable.compare_exchange_weak(seen, covers)) {}
                                        return std::string();
                                    });
    constexpr int threads = 8, rounds = 50;
    std::atomic<int> early{0};
    std::vector<std::thread> writers;
    for (int t = 0; t < threads; ++t)
        writers.emplace_back([&] {
            for (int i = 0; i < rounds; ++i) {
                const auto mine = ++position;
                group.sync();
                if (durable.load() < mine) ++early;
            }
        });
    for (auto& writer : writers) writer.join();
    CHECK(early == 0);
    CHECK(overlapped == 0);                                               // one fsync at a time
    CHECK(group.syncs() < static_cast<std::uint64_t>(threads * rounds));  // shared
    const auto before = group.syncs();
    group.sync();  // nothing new
    CHECK(group.syncs() == before);
}

TEST_CASE("group sync: a failed fsync fails every later sync, though the next fsync would succeed") {
    std::uint64_t position = 1;
    int calls = 0;
    berth::storage::GroupSync group([&] { return position; },
                                    [&] { return ++calls == 1 ? std::string("EIO") : std::string(); });
    ++position;
    CHECK_THROWS_WITH(group.sync(), Catch::Contains("EIO"));
    ++position;
    CHECK_THROWS_WITH(group.sync(), Catch::Contains("restart berth"));  // no second fsync asked
    CHECK(calls == 1);
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

TEST_CASE("state pages read one moment, in order, and resume after any key", "[state]") {
    TempDir dir;
    MetaStore meta(dir.path());
    for (int i = 0; i < 25; ++i) {
        MetaStore::Batch batch;
        batch.record_tag("r" + std::to_string(i % 3), "t" + std::to_string(i), "sha256:x", {std::uint64_t(i + 1), "a"});
        meta.commit(batch, MetaStore::Durability::none);
    }
    auto view = meta.state_view();
    CHECK(view->head == 25);
    {  // written after the moment: not in its pages
        MetaStore::Batch batch;
        batch.record_tag("r0", "late", "sha256:x", {100, "a"});
        meta.commit(batch, MetaStore::Durability::none);
    }
    std::vector<std::string> seen;
    std::string after;
    for (int pages = 0;; ++pages) {
        REQUIRE(pages < 10);
        auto page = meta.state_page(view.get(), StatePart::tags, after, 10, 1 << 20, true);
        CHECK(page.records.size() <= 10);
        for (auto& r : page.records) seen.push_back(r.repo + "/" + r.key);
        after = page.last;
        if (page.done) break;
    }
    CHECK(seen.size() == 25);
    CHECK(std::is_sorted(seen.begin(), seen.end()));
    CHECK(std::find(seen.begin(), seen.end(), "r0/late") == seen.end());
    // Without a view: as things are now.
    CHECK(meta.state_page(nullptr, StatePart::tags, "", 100, 1 << 20, true).records.size() == 26);
}

TEST_CASE("state hashes agree where two stores agree and only there", "[state]") {
    TempDir a_dir, b_dir;
    MetaStore a(a_dir.path()), b(b_dir.path());
    for (auto* meta : {&a, &b})
        for (int i = 0; i < 20; ++i) {
            MetaStore::Batch batch;
            batch.record_link("r", "sha256:" + std::to_string(100 + i), {std::uint64_t(i + 1), "a"}, false, 1);
            meta->commit(batch, MetaStore::Durability::none);
        }
    MetaStore::Batch newer;
    newer.record_link("r", "sha256:115", {50, "b"}, true, 0);  // b unlinked one
    b.commit(newer, MetaStore::Durability::none);

    auto first = a.state_page(nullptr, StatePart::links, "", 10, 1 << 20, false);
    CHECK(first.records.empty());  // a summary
    CHECK_FALSE(first.done);
    CHECK(b.state_hash(StatePart::links, "", first.last) == first.hash);
    auto second = a.state_page(nullptr, StatePart::links, first.last, 10, 1 << 20, false);
    CHECK(second.done);
    CHECK(b.state_hash(StatePart::links, first.last, second.last) != second.hash);
    CHECK(a.state_hash(StatePart::links, first.last, second.last) == second.hash);
    // The same page with its records hashes the same.
    CHECK(a.state_page(nullptr, StatePart::links, first.last, 10, 1 << 20, true).hash == second.hash);
}

TEST_CASE("state parts split manifests into images (with tombstones) and indexes", "[state]") {
    TempDir dir;
    MetaStore meta(dir.path());
    const auto image = image_manifest();
    const auto image_digest = berth::oci::Digest::of(berth::oci::DigestAlgorithm::sha256, image);
    const std::string index =
        R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[)"
        R"({"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":")" +
        image_digest.str() + R"(","size":)" + std::to_string(image.size()) + "}]}";
    const auto index_digest = berth::oci::Digest::of(berth::oci::DigestAlgorithm::sha256, index);
    MetaStore::Batch batch;
    batch.record_manifest("r", image_digest, berth::oci::parse_manifest(image, ""), image, {1, "a"});
    batch.record_manifest("r", index_digest, berth::oci::parse_manifest(index, ""), index, {1, "a"});
    batch.tombstone_manifest("r", "sha256:gone", nullptr, {2, "a"});
    meta.commit(batch);
    auto images = meta.state_page(nullptr, StatePart::images, "", 10, 1 << 20, true).records;
    auto indexes = meta.state_page(nullptr, StatePart::indexes, "", 10, 1 << 20, true).records;
    REQUIRE(images.size() == 2);
    REQUIRE(indexes.size() == 1);
    CHECK(indexes[0].key == index_digest.str());
    CHECK(indexes[0].bytes == index);
    auto tombstone = std::find_if(images.begin(), images.end(), [](auto& r) { return r.deleted; });
    REQUIRE(tombstone != images.end());
    CHECK(tombstone->key == "sha256:gone");
    CHECK(meta.stamp_of(StatePart::images, "r", "sha256:gone") == std::pair{Stamp{2, "a"}, true});
    CHECK_FALSE(meta.stamp_of(StatePart::tags, "r", "nothing"));
}

TEST_CASE("the change log compacts up to a sequence and says where it starts", "[state]") {
    TempDir dir;
    MetaStore meta(dir.path());
    CHECK(meta.log_first() == 1);  // empty: one past the head
    for (int i = 0; i < 10; ++i) {
        MetaStore::Batch batch;
        batch.record_tag("r", "t" + std::to_string(i), "sha256:x", {std::uint64_t(i + 1), "a"});
        meta.commit(batch, MetaStore::Durability::none);
    }
    CHECK(meta.log_first() == 1);
    meta.compact_log(6);
    CHECK(meta.log_first() == 7);
    CHECK(meta.read_log(0, 100).size() == 4);
    CHECK(meta.read_log(0, 100).front().sequence == 7);
    CHECK(meta.log_stats().entries == 4);
    meta.compact_log(1000);  // never past the head
    CHECK(meta.log_first() == 11);
    CHECK(meta.log_head() == 10);
    // Written now: not before a moment already past.
    const auto now = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());
    CHECK(meta.log_written_before(now - 60000) == 0);
    CHECK(meta.log_written_before(now + 60000) == 10);
}

TEST_CASE("the record cache stays within its budget and keeps what is read often", "[state]") {
    TempDir dir;
    MetaStore meta(dir.path(), MetaStore::Mode::read_write, 64 << 10);  // 32 KiB for manifests
    const auto bytes = image_manifest() + std::string(1000, ' ');
    const auto digest = berth::oci::Digest::of(berth::oci::DigestAlgorithm::sha256, bytes);
    for (int i = 0; i < 200; ++i) {
        MetaStore::Batch batch;
        batch.record_manifest("r" + std::to_string(i), digest, berth::oci::parse_manifest(bytes, ""), bytes, {1, "a"});
        meta.commit(batch, MetaStore::Durability::none);
    }
    for (int round = 0; round < 3; ++round)
        for (int i = 0; i < 200; ++i) {
            REQUIRE(meta.manifest("r" + std::to_string(i), digest.str())->bytes == bytes);
            REQUIRE(meta.manifest("r0", digest.str()));  // hot: read between all others
        }
    // Correct after writes whatever was cached.
    MetaStore::Batch batch;
    batch.tombstone_manifest("r0", digest.str(), nullptr, {2, "a"});
    meta.commit(batch, MetaStore::Durability::none);
    CHECK(meta.manifest("r0", digest.str())->deleted);
}
