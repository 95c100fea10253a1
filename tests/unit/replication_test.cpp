// Replication as the registry sees it (through the registry::Peers seam, with
// an in-process fake standing in for the other replicas) and as the Applier
// does it (last writer wins, tombstones, blobs before references), all on real
// stores in temp dirs and without any network: the Applier gets no sources.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "berth/oci/error.hpp"
#include "berth/registry/peers.hpp"
#include "berth/registry/registry.hpp"
#include "berth/storage/events.hpp"
#include "berth/storage/records.hpp"
#include "berth/net/client.hpp"
#include "replication/applier.hpp"
#include "replication/peer_client.hpp"
#include "error_code.hpp"
#include "fixtures.hpp"
#include "stand_in_peer.hpp"

using namespace berth;
using oci::ErrorCode;
using replication::ApplyResult;
using storage::Event;
using storage::Stamp;

namespace {

using test::image_manifest;
using test::image_type;
using test::index_manifest;
using test::index_type;
using test::sha256;

// ---------------------------------------------------------------------------
// Registry side

// One replica: real stores in a temp dir and a registry over them.
struct Replica : test::RegistryFixture {
    explicit Replica(const std::string& id, registry::Peers* peers = nullptr)
        : RegistryFixture({.options = test::registry_options(id), .with = {.peers = peers}}) {}
};

// Stands in for the other replicas: records every call, and answers as told.
// By default it has nothing to give and every write reaches its quorum.
class FakePeers : public registry::Peers {
public:
    std::vector<std::pair<std::string, std::string>> blob_fetches;      // repo, digest
    std::vector<std::pair<std::string, std::string>> manifest_fetches;  // repo, reference
    std::vector<std::vector<Event>> replicated;

    std::function<bool(const std::string&, const oci::Digest&)> on_fetch_blob = [](auto&, auto&) { return false; };
    std::function<bool(const std::string&, const std::string&)> on_fetch_manifest = [](auto&, auto&) { return false; };
    std::function<void(const std::vector<Event>&)> on_replicate = [](auto&) {};
    registry::Lookup when_missing = registry::Lookup::absent;  // what a failed fetch reports

    registry::Lookup fetch_blob(const std::string& repo, const oci::Digest& digest) override {
        blob_fetches.emplace_back(repo, digest.str());
        return on_fetch_blob(repo, digest) ? registry::Lookup::here : when_missing;
    }
    bool fetch_manifest(const std::string& repo, const std::string& reference) override {
        manifest_fetches.emplace_back(repo, reference);
        return on_fetch_manifest(repo, reference);
    }
    void replicate(const std::vector<Event>& events) override {
        replicated.push_back(events);
        on_replicate(events);
    }
    bool evaluates(const std::string&) override { return true; }
    registry::TagClaim claim_tag(const std::string&, const std::string&, const std::string&) override {
        return {registry::TagClaim::Outcome::granted, {}, {}};
    }
    std::optional<std::vector<std::pair<std::string, std::uint64_t>>> pulls_elsewhere(const std::string&,
                                                                                      std::uint64_t) override {
        return std::vector<std::pair<std::string, std::uint64_t>>{};
    }
};

// What a read-through fetch does, done by hand: copies a blob the other
// replica links in repo into this one's store, then writes the link.
bool copy_blob(Replica& from, Replica& to, const std::string& repo, const oci::Digest& digest) {
    auto link = from.meta.link(repo, digest.str());
    if (!link || link->deleted) return false;
    test::store_blob(to.blobs, *from.blobs.read(digest, 1 << 20));
    auto lock = to.meta.lock_writes();
    storage::MetaStore::Batch batch;
    batch.record_link(repo, digest.str(), link->stamp, false, *to.blobs.size(digest));
    to.meta.commit(batch);
    return true;
}

// The same for a manifest, by tag or by digest: copies its record (and the
// tag's, for a tag) as the other replica holds them.
bool copy_manifest(Replica& from, Replica& to, const std::string& repo, const std::string& reference) {
    std::string digest = reference;
    std::optional<storage::TagRecord> tag;
    if (!oci::Digest::parse(reference)) {
        tag = from.meta.tag(repo, reference);
        if (!tag || tag->deleted()) return false;
        digest = tag->digest;
    }
    auto record = from.meta.manifest(repo, digest);
    if (!record || record->deleted) return false;
    auto lock = to.meta.lock_writes();
    storage::MetaStore::Batch batch;
    auto parsed_digest = oci::Digest::parse(digest);
    batch.record_manifest(repo, *parsed_digest, oci::parse_manifest(record->bytes, record->media_type), record->bytes,
                          record->stamp);
    if (tag) batch.record_tag(repo, reference, tag->digest, tag->stamp);
    to.meta.commit(batch);
    return true;
}

using Call = std::pair<std::string, std::string>;

// ---------------------------------------------------------------------------
// Applier side

// One replica's stores and an Applier over them; it is given no sources, so
// whatever content an event needs must already be here.
// Every other replica, as the applier asks them: one peer on loopback that holds nothing asked for,
// as after a delete.
struct DeletedEverywhere {
    net::Client client;
    test::StandInPeer peer{test::StandInPeer::Mode::absent};
    replication::PeerClient asked{client, peer.address(), {}, "secret", "self"};
    const std::vector<replication::PeerClient*> sources{&asked};
};

struct ApplierFixture : test::StoreFixture {
    replication::Applier applier{blobs, meta, clock, {}};
    const std::vector<replication::PeerClient*> no_sources;

    ApplyResult apply(const Event& event) { return applier.apply(event, no_sources); }

    ApplyResult apply_manifest(const std::string& repo, const std::string& bytes, const Stamp& stamp) {
        return applier.apply_manifest(repo, sha256(bytes).str(), stamp, replication::ManifestContent{image_type, bytes},
                                      no_sources);
    }

    // An image manifest whose blobs are here, stored as if replicated long ago.
    std::string stored_image(const std::string& repo, const std::string& seed) {
        const std::string config = "config-" + seed, layer = "layer-" + seed;
        auto bytes = image_manifest(add_blob(config), config.size(), add_blob(layer), layer.size());
        REQUIRE(apply_manifest(repo, bytes, Stamp{10, "origin"}) == ApplyResult::applied);
        return sha256(bytes).str();
    }

    std::string tag_digest(const std::string& repo, const std::string& tag) {
        auto record = meta.tag(repo, tag);
        return record ? record->digest : "<no record>";
    }
};

Event tag_event(const std::string& digest, const std::string& tag, Stamp stamp) {
    return {Event::Type::tag, "r", digest, tag, std::move(stamp)};
}

}  // namespace

// ===========================================================================
// Registry with peers

TEST_CASE("a blob missing here is read through from a peer, once, and only if the peer has it", "[replication]") {
    FakePeers peers;
    Replica local("local", &peers), other("other");
    auto digest = other.push_blob("r", "layer bytes");

    SECTION("the peer copies it in: it is served from here") {
        peers.on_fetch_blob = [&](const std::string& repo, const oci::Digest& d) {
            return copy_blob(other, local, repo, d);
        };
        auto info = local.reg.stat_blob("r", digest);
        CHECK(info.digest.str() == digest);
        CHECK(info.size == 11);
        CHECK(local.reg.open_blob("r", digest).blob.size() == 11);
        CHECK(local.meta.has_link("r", digest));
        CHECK(peers.blob_fetches == std::vector<Call>{{"r", digest}});
        // Now local: a second read asks nobody.
        CHECK(local.reg.stat_blob("r", digest).size == 11);
        CHECK(peers.blob_fetches.size() == 1);
    }
    SECTION("no peer has it: blob_unknown") {
        CHECK(code_of([&] { local.reg.stat_blob("r", digest); }) == ErrorCode::blob_unknown);
        CHECK(peers.blob_fetches == std::vector<Call>{{"r", digest}});
        CHECK_FALSE(local.blobs.size(sha256("layer bytes")));
    }
    SECTION("a peer claiming success without the blob arriving is not believed") {
        peers.on_fetch_blob = [](auto&, auto&) { return true; };
        CHECK(code_of([&] { local.reg.stat_blob("r", digest); }) == ErrorCode::blob_unknown);
        CHECK(peers.blob_fetches.size() == 1);
    }
}

TEST_CASE("an unlinked blob is not read through again", "[replication]") {
    FakePeers peers;
    Replica local("local", &peers), other("other");
    auto digest = local.push_blob("r", "content");
    other.push_blob("r", "content");  // the peer has not seen the unlink yet
    local.reg.delete_blob("r", digest);
    peers.on_fetch_blob = [&](const std::string& repo, const oci::Digest& d) {
        return copy_blob(other, local, repo, d);
    };
    CHECK(code_of([&] { local.reg.stat_blob("r", digest); }) == ErrorCode::blob_unknown);
    CHECK(peers.blob_fetches.empty());
    CHECK(local.meta.link("r", digest)->deleted);
}

TEST_CASE("a manifest missing here is read through by tag and by digest", "[replication]") {
    FakePeers peers;
    Replica local("local", &peers), other("other");
    auto body = other.image("r", "1");
    auto pushed = other.reg.put_manifest("r", "v1", image_type, body);
    const auto digest = pushed.digest.str();

    SECTION("the peer copies it in") {
        peers.on_fetch_manifest = [&](const std::string& repo, const std::string& reference) {
            return copy_manifest(other, local, repo, reference);
        };
        SECTION("by tag") {
            auto manifest = local.reg.get_manifest("r", "v1");
            CHECK(manifest.bytes == body);
            CHECK(manifest.digest == pushed.digest);
            CHECK(manifest.media_type == image_type);
            // Tag and manifest came in one fetch.
            CHECK(peers.manifest_fetches == std::vector<Call>{{"r", "v1"}});
            CHECK(local.meta.tag("r", "v1")->digest == digest);
        }
        SECTION("by digest") {
            auto manifest = local.reg.get_manifest("r", digest);
            CHECK(manifest.bytes == body);
            CHECK(peers.manifest_fetches == std::vector<Call>{{"r", digest}});
            CHECK_FALSE(local.meta.tag("r", "v1"));
        }
        local.reg.get_manifest("r", digest);  // local now: nobody is asked again
        CHECK(peers.manifest_fetches.size() == 1);
    }
    SECTION("no peer has it, in a repository unknown here: name_unknown") {
        CHECK(code_of([&] { local.reg.get_manifest("r", "v1"); }) == ErrorCode::name_unknown);
        CHECK(code_of([&] { local.reg.get_manifest("r", digest); }) == ErrorCode::name_unknown);
        CHECK(peers.manifest_fetches == std::vector<Call>{{"r", "v1"}, {"r", digest}});
    }
    SECTION("no peer has it, in a repository known here: manifest_unknown") {
        local.push_blob("r", "something");
        CHECK(code_of([&] { local.reg.get_manifest("r", "v1"); }) == ErrorCode::manifest_unknown);
        CHECK(code_of([&] { local.reg.get_manifest("r", digest); }) == ErrorCode::manifest_unknown);
        CHECK(peers.manifest_fetches == std::vector<Call>{{"r", "v1"}, {"r", digest}});
    }
}

TEST_CASE("a tombstone here is an answer, not a gap to read through", "[replication]") {
    FakePeers peers;
    Replica local("local", &peers), other("other");
    // Both replicas hold the same manifest; only this one has seen its delete.
    auto pushed = local.reg.put_manifest("r", "v1", image_type, local.image("r", "1"));
    other.reg.put_manifest("r", "v1", image_type, other.image("r", "1"));
    peers.on_fetch_manifest = [&](const std::string& repo, const std::string& reference) {
        return copy_manifest(other, local, repo, reference);  // would bring it back
    };
    const auto digest = pushed.digest.str();
    peers.replicated.clear();  // the pushes above
    local.reg.delete_manifest("r", digest);

    // The delete waited for the quorum with its tag and manifest tombstones.
    REQUIRE(peers.replicated.size() == 1);
    REQUIRE(peers.replicated[0].size() == 2);
    CHECK(peers.replicated[0][0].type == Event::Type::tag_deleted);
    CHECK(peers.replicated[0][0].tag == "v1");
    CHECK(peers.replicated[0][1].type == Event::Type::manifest_deleted);
    CHECK(peers.replicated[0][1].digest == digest);

    CHECK(code_of([&] { local.reg.get_manifest("r", digest); }) == ErrorCode::manifest_unknown);
    CHECK(code_of([&] { local.reg.get_manifest("r", "v1"); }) == ErrorCode::manifest_unknown);
    CHECK(peers.manifest_fetches.empty());
    CHECK(local.meta.manifest("r", digest)->deleted);
}

TEST_CASE("a manifest push waits for the write quorum with its manifest and tag events", "[replication]") {
    FakePeers peers;
    Replica local("local", &peers);
    auto body = local.image("r", "q");
    const auto digest = sha256(body).str();

    SECTION("quorum reached: the digest is returned") {
        auto result = local.reg.put_manifest("r", "v1", image_type, body);
        CHECK(result.digest.str() == digest);
        CHECK(result.tags == std::vector<std::string>{"v1"});
        REQUIRE(peers.replicated.size() == 1);
        const auto& events = peers.replicated[0];
        REQUIRE(events.size() == 2);
        CHECK(events[0].type == Event::Type::manifest);
        CHECK(events[0].repo == "r");
        CHECK(events[0].digest == digest);
        CHECK(events[1].type == Event::Type::tag);
        CHECK(events[1].repo == "r");
        CHECK(events[1].digest == digest);
        CHECK(events[1].tag == "v1");
        for (auto& event : events) CHECK(event.stamp.replica == "local");
        // The events carry the stamps the records were committed with.
        CHECK(local.meta.manifest("r", digest)->stamp == events[0].stamp);
        CHECK(local.meta.tag("r", "v1")->stamp == events[1].stamp);
    }
    SECTION("quorum not reached: the error reaches the client, the write stays, a retry succeeds") {
        peers.on_replicate = [](const std::vector<Event>&) {
            throw oci::Error(ErrorCode::unavailable, "write quorum not reached");
        };
        CHECK(code_of([&] { local.reg.put_manifest("r", "v1", image_type, body); }) == ErrorCode::unavailable);
        CHECK(peers.replicated.size() == 1);
        // Committed before waiting: readable here, without asking anybody.
        CHECK(local.reg.get_manifest("r", "v1").bytes == body);
        CHECK(local.reg.get_manifest("r", digest).bytes == body);
        CHECK(peers.manifest_fetches.empty());

        peers.on_replicate = [](const std::vector<Event>&) {};
        auto retry = local.reg.put_manifest("r", "v1", image_type, body);
        CHECK(retry.digest.str() == digest);
        REQUIRE(peers.replicated.size() == 2);
        CHECK(peers.replicated[1].size() == 2);
        CHECK(peers.replicated[1][0].stamp > peers.replicated[0][0].stamp);
        CHECK(local.reg.get_manifest("r", "v1").digest == retry.digest);
    }
}

TEST_CASE("a manifest whose blob may be on a replica out of reach is a retry, not a refusal", "[replication]") {
    FakePeers peers;
    Replica local("local", &peers), other("other");
    auto body = other.image("r", "q");  // its blobs acknowledged by the other replica only

    SECTION("a replica could not be asked: unavailable (503, retryable)") {
        peers.when_missing = registry::Lookup::unknown;
        CHECK(code_of([&] { local.reg.put_manifest("r", "v1", image_type, body); }) == ErrorCode::unavailable);
    }
    SECTION("every replica answered that it has none: manifest_blob_unknown") {
        CHECK(code_of([&] { local.reg.put_manifest("r", "v1", image_type, body); }) ==
              ErrorCode::manifest_blob_unknown);
    }
    CHECK_FALSE(local.meta.manifest("r", sha256(body).str()));
    CHECK(peers.replicated.empty());
}

TEST_CASE("an index whose child manifest is missing here asks the peers for the child", "[replication]") {
    FakePeers peers;
    Replica local("local", &peers), other("other");
    auto child_body = other.image("r", "child");
    const auto child = sha256(child_body).str();
    other.reg.put_manifest("r", child, image_type, child_body);  // by digest: no tag
    const auto index = index_manifest(child, child_body.size());

    SECTION("no peer has it: manifest_blob_unknown") {
        CHECK(code_of([&] { local.reg.put_manifest("r", "i", index_type, index); }) ==
              ErrorCode::manifest_blob_unknown);
        CHECK(peers.manifest_fetches == std::vector<Call>{{"r", child}});
        CHECK(peers.replicated.empty());
    }
    SECTION("a peer copies it in: the index is stored") {
        peers.on_fetch_manifest = [&](const std::string& repo, const std::string& reference) {
            return copy_manifest(other, local, repo, reference);
        };
        auto result = local.reg.put_manifest("r", "i", index_type, index);
        CHECK(result.digest == sha256(index));
        CHECK(peers.manifest_fetches == std::vector<Call>{{"r", child}});
        CHECK(local.reg.get_manifest("r", "i").media_type == index_type);
        CHECK(local.reg.get_manifest("r", child).bytes == child_body);
        CHECK(peers.replicated.size() == 1);
    }
}

// ===========================================================================
// Applier

TEST_CASE("tags: the last writer wins by stamp", "[replication]") {
    ApplierFixture f;
    const auto a = f.stored_image("r", "a");
    const auto b = f.stored_image("r", "b");
    const auto c = f.stored_image("r", "c");

    CHECK(f.apply(tag_event(a, "t", {100, "b"})) == ApplyResult::applied);
    CHECK(f.tag_digest("r", "t") == a);
    CHECK(f.apply(tag_event(b, "t", {90, "a"})) == ApplyResult::skipped);  // older: late, loses
    CHECK(f.tag_digest("r", "t") == a);
    CHECK(f.meta.tag("r", "t")->stamp == Stamp{100, "b"});
    CHECK(f.apply(tag_event(c, "t", {110, "a"})) == ApplyResult::applied);  // newer: wins
    CHECK(f.tag_digest("r", "t") == c);
    CHECK(f.meta.tag("r", "t")->stamp == Stamp{110, "a"});
}

TEST_CASE("tags: on equal clocks the higher replica id wins, whatever the order of arrival", "[replication]") {
    auto converge = [](bool low_first) {
        ApplierFixture f;
        const auto from_a = f.stored_image("r", "a");
        const auto from_b = f.stored_image("r", "b");
        auto low = tag_event(from_a, "t", {100, "replica-a"});
        auto high = tag_event(from_b, "t", {100, "replica-b"});
        if (low_first) {
            CHECK(f.apply(low) == ApplyResult::applied);
            CHECK(f.apply(high) == ApplyResult::applied);
        } else {
            CHECK(f.apply(high) == ApplyResult::applied);
            CHECK(f.apply(low) == ApplyResult::skipped);
        }
        CHECK(f.tag_digest("r", "t") == from_b);
        return f.tag_digest("r", "t");
    };
    CHECK(converge(true) == converge(false));
}

TEST_CASE("tombstones: a deletion holds against older writes arriving late", "[replication]") {
    ApplierFixture f;
    const auto digest = f.stored_image("r", "m");

    SECTION("a tag deleted at 200 is not brought back by a tag written at 150") {
        CHECK(f.apply({Event::Type::tag_deleted, "r", {}, "t", {200, "a"}}) == ApplyResult::applied);
        CHECK(f.apply(tag_event(digest, "t", {150, "b"})) == ApplyResult::skipped);
        REQUIRE(f.meta.tag("r", "t"));
        CHECK(f.meta.tag("r", "t")->deleted());
        CHECK(f.meta.tags("r", "", 10).empty());
        // A newer tag does win over the tombstone.
        CHECK(f.apply(tag_event(digest, "t", {250, "b"})) == ApplyResult::applied);
        CHECK(f.tag_digest("r", "t") == digest);
    }
    SECTION("a manifest deleted at 200 is not brought back by a manifest written at 150") {
        const auto bytes = f.meta.manifest("r", digest)->bytes;
        CHECK(f.apply({Event::Type::manifest_deleted, "r", digest, {}, {200, "a"}}) == ApplyResult::applied);
        CHECK(f.meta.manifest("r", digest)->deleted);
        // Not even with the bytes at hand.
        CHECK(f.apply_manifest("r", bytes, {150, "b"}) == ApplyResult::skipped);
        CHECK(f.apply({Event::Type::manifest, "r", digest, {}, {150, "b"}}) == ApplyResult::skipped);
        CHECK(f.meta.manifest("r", digest)->deleted);
        CHECK(f.meta.manifest("r", digest)->stamp == Stamp{200, "a"});
        // Nor does an older tag pointing at it.
        CHECK(f.apply(tag_event(digest, "t", {150, "b"})) == ApplyResult::skipped);
        CHECK_FALSE(f.meta.tag("r", "t"));
        // A push after the delete does.
        CHECK(f.apply_manifest("r", bytes, {300, "b"}) == ApplyResult::applied);
        CHECK_FALSE(f.meta.manifest("r", digest)->deleted);
        CHECK(f.meta.manifest("r", digest)->bytes == bytes);
    }
}

// What this replica's log says, oldest first: "type repo key clock", the key a tag or a digest.
std::vector<std::string> logged(storage::MetaStore& meta) {
    std::vector<std::string> out;
    for (auto& entry : meta.read_log(0, 100)) {
        auto event = Event::parse(entry.event);
        REQUIRE(event);
        const bool tagged = event->type == Event::Type::tag || event->type == Event::Type::tag_deleted;
        out.push_back(nlohmann::json::parse(entry.event).at("type").get<std::string>() + " " + event->repo + " " +
                      (tagged ? event->tag : event->digest.substr(7, 4)) + " " + std::to_string(event->stamp.clock));
    }
    return out;
}

TEST_CASE("a push whose manifest every replica deleted before this one asked is still logged, once", "[replication]") {
    ApplierFixture f;
    DeletedEverywhere deleted;
    const auto& sources = deleted.sources;
    const auto digest = sha256("a manifest pushed and deleted at its origin").str();
    // Pushed by tag: the manifest and its tag share a stamp.
    const Event push{Event::Type::manifest, "r", digest, {}, {100, "a"}};
    const Event tag{Event::Type::tag, "r", digest, "v1", {100, "a"}};

    CHECK(f.applier.apply(push, sources) == ApplyResult::gone);
    CHECK(f.applier.apply(tag, sources) != ApplyResult::applied);
    // Told again by another peer's log: not logged twice.
    CHECK(f.applier.apply(push, sources) != ApplyResult::applied);
    CHECK(f.applier.apply(tag, sources) != ApplyResult::applied);
    CHECK(logged(f.meta).size() == 2);
    // Nothing of it is served: the push is kept as a tombstone, the tag not set.
    REQUIRE(f.meta.manifest("r", digest));
    CHECK(f.meta.manifest("r", digest)->deleted);
    CHECK_FALSE(f.meta.tag("r", "v1"));
    // Its delete, arriving after, is logged and holds.
    CHECK(f.applier.apply({Event::Type::tag_deleted, "r", {}, "v1", {200, "a"}}, sources) == ApplyResult::applied);
    CHECK(f.applier.apply({Event::Type::manifest_deleted, "r", digest, {}, {200, "a"}}, sources) ==
          ApplyResult::applied);
    const auto short_digest = digest.substr(7, 4);
    CHECK(logged(f.meta) == std::vector<std::string>{"manifest r " + short_digest + " 100", "tag r v1 100",
                                                     "tag_deleted r v1 200",
                                                     "manifest_deleted r " + short_digest + " 200"});
    // Pushed again after that delete and deleted again before this replica asked: logged too.
    CHECK(f.applier.apply({Event::Type::manifest, "r", digest, {}, {300, "a"}}, sources) == ApplyResult::gone);
    CHECK(f.meta.manifest("r", digest)->deleted);
    CHECK(logged(f.meta).back() == "manifest r " + short_digest + " 300");
}

TEST_CASE("a tag move kept for a deleted manifest: once the bytes are back, moves apply, counted and told",
          "[replication]") {
    ApplierFixture f;
    const auto digest = f.stored_image("r", "again");
    const auto bytes = f.meta.manifest("r", digest)->bytes;
    REQUIRE(f.apply({Event::Type::manifest_deleted, "r", digest, {}, {200, "a"}}) == ApplyResult::applied);
    const auto move = tag_event(digest, "t", {150, "b"});
    CHECK(f.apply(move) == ApplyResult::skipped);                               // logged as overtaken
    REQUIRE(f.apply_manifest("r", bytes, {300, "c"}) == ApplyResult::applied);  // the same bytes pushed again
    SECTION("the same move, from another peer's log") {
        CHECK(f.apply(move) == ApplyResult::applied);
        CHECK(f.tag_digest("r", "t") == digest);
        CHECK(f.meta.repository_usage("r").tags == 1);
        auto log = logged(f.meta);
        CHECK(std::count(log.begin(), log.end(), std::string("tag r t 150")) >= 1);
    }
    SECTION("another replica's move to the same digest at a lower clock") {
        CHECK(f.apply(tag_event(digest, "t", {120, "c"})) == ApplyResult::applied);
        auto log = logged(f.meta);
        CHECK(std::count(log.begin(), log.end(), std::string("tag r t 120")) == 1);
    }
}

TEST_CASE("a push logged against an older tombstone is not logged again when its bytes turn up", "[replication]") {
    ApplierFixture f;
    DeletedEverywhere deleted;
    const auto& sources = deleted.sources;
    const auto digest = f.stored_image("r", "thrice");
    const auto bytes = f.meta.manifest("r", digest)->bytes;
    REQUIRE(f.apply({Event::Type::manifest_deleted, "r", digest, {}, {200, "a"}}) == ApplyResult::applied);
    const Event push{Event::Type::manifest, "r", digest, {}, {300, "a"}};
    REQUIRE(f.applier.apply(push, sources) == ApplyResult::gone);  // deleted again everywhere: logged
    // The push's own bytes after all (its origin's quorum POST, late): it stays deleted, logged once.
    CHECK(f.applier.apply(push, sources, replication::ManifestContent{image_type, bytes}) == ApplyResult::skipped);
    auto log = logged(f.meta);
    CHECK(std::count(log.begin(), log.end(), "manifest r " + digest.substr(7, 4) + " 300") == 1);
    CHECK(f.meta.manifest("r", digest)->deleted);
}

TEST_CASE("an index whose child every replica deleted is no deleted index", "[replication]") {
    ApplierFixture f;
    DeletedEverywhere deleted;
    const auto& sources = deleted.sources;
    const std::string config = "config-child", layer = "layer-child";
    const auto child = image_manifest(f.add_blob(config), config.size(), f.add_blob(layer), layer.size());
    const auto index = index_manifest(sha256(child).str(), child.size());
    const auto digest = sha256(index).str();
    const Event push{Event::Type::manifest, "r", digest, {}, {100, "a"}};
    CHECK(f.applier.apply(push, sources, replication::ManifestContent{index_type, index}) == ApplyResult::gone);
    CHECK_FALSE(f.meta.manifest("r", digest));
    CHECK(f.meta.read_log(0, 100).empty());
    // Once the child is here again, the same push applies.
    REQUIRE(f.apply_manifest("r", child, {150, "a"}) == ApplyResult::applied);
    CHECK(f.applier.apply(push, sources, replication::ManifestContent{index_type, index}) == ApplyResult::applied);
    CHECK_FALSE(f.meta.manifest("r", digest)->deleted);
}

TEST_CASE("a push whose sources could not all be asked is a retry, not a tombstone", "[replication]") {
    ApplierFixture f;
    DeletedEverywhere deleted;
    test::StandInPeer away(test::StandInPeer::Mode::refuse);
    replication::PeerClient refusing(deleted.client, away.address(), {}, "secret", "self");
    const auto digest = sha256("a manifest one peer may still hold").str();
    const Event push{Event::Type::manifest, "r", digest, {}, {100, "a"}};
    CHECK(f.applier.apply(push, {&deleted.asked, &refusing}) == ApplyResult::unavailable);
    CHECK(f.applier.apply(push, f.no_sources) == ApplyResult::gone);  // no source proves nothing gone
    CHECK_FALSE(f.meta.manifest("r", digest));
    CHECK(f.meta.read_log(0, 100).empty());
}

TEST_CASE("a push of bytes already here under an older push needs no source", "[replication]") {
    ApplierFixture f;
    const auto digest = f.stored_image("r", "again");
    CHECK(f.apply({Event::Type::manifest, "r", digest, {}, {100, "a"}}) == ApplyResult::applied);
    CHECK(f.meta.manifest("r", digest)->stamp == Stamp{100, "a"});
    CHECK(logged(f.meta).back() == "manifest r " + digest.substr(7, 4) + " 100");
}

TEST_CASE("a peer's event with names a client could not have pushed changes nothing", "[replication]") {
    ApplierFixture f;
    const auto digest = f.stored_image("r", "named");
    const auto head = f.meta.read_log(0, 100).size();
    for (const Event& event : std::vector<Event>{
             {Event::Type::tag, "r", digest, "bad tag\n", {100, "a"}},
             {Event::Type::tag_deleted, "r", {}, std::string(200, 't'), {100, "a"}},
             {Event::Type::manifest_deleted, "R/../x", digest, {}, {100, "a"}},
             {Event::Type::manifest_deleted, "r", "sha256:nothex", {}, {100, "a"}},
             {Event::Type::manifest_deleted, "r", digest, {}, {100, "A\nforged"}},
             {Event::Type::manifest_deleted, "r", digest, {}, {100, ""}},
             {Event::Type::unlink, "", digest, {}, {100, "a"}},
         })
        CHECK(f.apply(event) == ApplyResult::gone);
    CHECK(f.meta.read_log(0, 100).size() == head);
    CHECK_FALSE(f.meta.manifest("r", digest)->deleted);
    // The same names in a page of state, and a manifest read through from an origin no replica is.
    using storage::StatePart;
    using storage::StateRecord;
    std::vector<StateRecord> tags{{"r", "bad tag\n", {100, "a"}, true},
                                  {"R/../x", "t", {100, "a"}, true},
                                  {"r", "t", {100, "A\nforged"}, false, digest}};
    CHECK(f.applier.apply_state(StatePart::tags, tags, f.no_sources, 1, nullptr) == ApplyResult::skipped);
    std::vector<StateRecord> links{{"R/../x", digest, {100, "a"}, true}, {"r", "sha256:nothex", {100, "a"}, true}};
    CHECK(f.applier.apply_state(StatePart::links, links, f.no_sources, 1, nullptr) == ApplyResult::skipped);
    const auto bytes = image_manifest(f.add_blob("c2"), 2, f.add_blob("l2"), 2);
    CHECK(f.applier.apply_manifest("r", sha256(bytes).str(), {100, "A\nforged"},
                                   replication::ManifestContent{image_type, bytes}, f.no_sources) == ApplyResult::gone);
    CHECK(f.meta.read_log(0, 100).size() == head);
}

TEST_CASE("blobs before references: nothing points at content that is not here", "[replication]") {
    ApplierFixture f;
    const std::string config = "config-x", layer = "layer-x";
    const auto config_digest = sha256(config), layer_digest = sha256(layer);

    SECTION("a link to an absent blob, with no source, is not applied until the blob is here") {
        Event link{Event::Type::link, "r", layer_digest.str(), {}, {100, "a"}};
        auto result = f.apply(link);
        CHECK((result == ApplyResult::gone || result == ApplyResult::unavailable));
        CHECK_FALSE(f.meta.has_link("r", layer_digest.str()));
        CHECK_FALSE(f.meta.link("r", layer_digest.str()));

        f.add_blob(layer);
        CHECK(f.apply(link) == ApplyResult::applied);
        CHECK(f.meta.has_link("r", layer_digest.str()));
    }
    SECTION("a manifest whose blobs are absent is not applied until all of them are here") {
        const auto bytes = image_manifest(config_digest, config.size(), layer_digest, layer.size());
        const auto digest = sha256(bytes).str();
        auto result = f.apply_manifest("r", bytes, {100, "a"});
        CHECK((result == ApplyResult::gone || result == ApplyResult::unavailable));
        CHECK_FALSE(f.meta.manifest("r", digest));

        f.add_blob(config);  // one of two is not enough
        result = f.apply_manifest("r", bytes, {100, "a"});
        CHECK((result == ApplyResult::gone || result == ApplyResult::unavailable));
        CHECK_FALSE(f.meta.manifest("r", digest));
        CHECK_FALSE(f.meta.has_repository("r"));

        f.add_blob(layer);
        CHECK(f.apply_manifest("r", bytes, {100, "a"}) == ApplyResult::applied);
        REQUIRE(f.meta.manifest("r", digest));
        CHECK(f.meta.manifest("r", digest)->bytes == bytes);
        // Its blobs are linked with it.
        CHECK(f.meta.has_link("r", config_digest.str()));
        CHECK(f.meta.has_link("r", layer_digest.str()));
    }
    SECTION("a manifest event without the bytes here, and no source, is not applied") {
        const auto bytes = image_manifest(f.add_blob(config), config.size(), f.add_blob(layer), layer.size());
        const auto digest = sha256(bytes).str();
        auto result = f.apply({Event::Type::manifest, "r", digest, {}, {100, "a"}});
        CHECK((result == ApplyResult::gone || result == ApplyResult::unavailable));
        CHECK_FALSE(f.meta.manifest("r", digest));
        // Nor a tag pointing at it.
        result = f.apply(tag_event(digest, "t", {100, "a"}));
        CHECK((result == ApplyResult::gone || result == ApplyResult::unavailable));
        CHECK_FALSE(f.meta.tag("r", "t"));
    }
}

TEST_CASE("applying the same event twice changes nothing the second time", "[replication]") {
    ApplierFixture f;
    const auto digest = f.stored_image("r", "i");
    const auto blob = f.add_blob("a blob").str();

    const std::vector<Event> events = {
        {Event::Type::link, "r", blob, {}, {100, "a"}},
        tag_event(digest, "t", {100, "a"}),
        {Event::Type::tag_deleted, "r", {}, "t", {110, "a"}},
        {Event::Type::unlink, "r", blob, {}, {120, "a"}},
        {Event::Type::manifest_deleted, "r", digest, {}, {130, "a"}},
    };
    for (const auto& event : events) {
        INFO("event " << event.json());
        CHECK(f.apply(event) == ApplyResult::applied);
        const auto head = f.meta.log_head();
        const auto tag = f.meta.tag("r", "t");
        const auto link = f.meta.link("r", blob);
        const auto manifest = f.meta.manifest("r", digest);

        CHECK(f.apply(event) == ApplyResult::skipped);
        CHECK(f.meta.log_head() == head);  // not logged (nor relayed) again
        CHECK(f.meta.tag("r", "t").has_value() == tag.has_value());
        if (tag) CHECK(f.meta.tag("r", "t")->digest == tag->digest);
        if (tag) CHECK(f.meta.tag("r", "t")->stamp == tag->stamp);
        CHECK(f.meta.link("r", blob).has_value() == link.has_value());
        if (link) CHECK(f.meta.link("r", blob)->deleted == link->deleted);
        if (link) CHECK(f.meta.link("r", blob)->stamp == link->stamp);
        CHECK(f.meta.manifest("r", digest)->deleted == manifest->deleted);
        CHECK(f.meta.manifest("r", digest)->stamp == manifest->stamp);
    }
    // And a manifest with its bytes.
    const auto bytes = image_manifest(f.add_blob("c"), 1, f.add_blob("l"), 1);
    CHECK(f.apply_manifest("r", bytes, {200, "a"}) == ApplyResult::applied);
    const auto head = f.meta.log_head();
    CHECK(f.apply_manifest("r", bytes, {200, "a"}) == ApplyResult::skipped);
    CHECK(f.meta.log_head() == head);
    CHECK(f.meta.manifest("r", sha256(bytes).str())->bytes == bytes);
}

TEST_CASE("pages of one store's state applied to another give the same state, once", "[replication][state]") {
    using storage::StatePart;
    ApplierFixture from, to;
    // Images (two repositories), an index over one, tags, a deleted tag, an unlinked blob, a tombstone.
    std::vector<std::string> images;
    for (int i = 0; i < 30; ++i) images.push_back(from.stored_image(i % 2 ? "a/one" : "b", std::to_string(i)));
    const auto child = from.meta.manifest("b", images[0]);
    const auto index = index_manifest(images[0], child->bytes.size());
    REQUIRE(from.applier.apply_manifest("b", sha256(index).str(), {20, "origin"},
                                        replication::ManifestContent{index_type, index},
                                        from.no_sources) == ApplyResult::applied);
    for (int i = 0; i < 30; ++i)
        REQUIRE(from.apply({Event::Type::tag, i % 2 ? "a/one" : "b", images[i], "t" + std::to_string(i), {30, "o"}}) ==
                ApplyResult::applied);
    REQUIRE(from.apply({Event::Type::tag, "b", sha256(index).str(), "multi", {30, "o"}}) == ApplyResult::applied);
    REQUIRE(from.apply({Event::Type::tag_deleted, "b", {}, "t2", {40, "o"}}) == ApplyResult::applied);
    // A delete by digest takes its tags with it.
    REQUIRE(from.apply({Event::Type::tag_deleted, "b", {}, "t4", {40, "o"}}) == ApplyResult::applied);
    REQUIRE(from.apply({Event::Type::manifest_deleted, "b", images[4], {}, {40, "o"}}) == ApplyResult::applied);
    const auto extra = from.add_blob("extra");
    REQUIRE(from.apply({Event::Type::link, "b", extra.str(), {}, {30, "o"}}) == ApplyResult::applied);
    REQUIRE(from.apply({Event::Type::unlink, "b", extra.str(), {}, {41, "o"}}) == ApplyResult::applied);
    // The receiver has the blobs (no sources here to fetch them from).
    from.blobs.for_each([&](const oci::Digest& digest, std::uint64_t, std::int64_t) {
        test::store_blob(to.blobs, *from.blobs.read(digest, 1 << 20));
    });

    auto copy_all = [&](std::size_t page_size) {
        auto view = from.meta.state_view();
        for (auto part : {StatePart::links, StatePart::images, StatePart::indexes, StatePart::tags}) {
            std::string after;
            for (;;) {
                auto page = from.meta.state_page(view.get(), part, after, page_size, 1 << 20, true);
                REQUIRE(to.applier.apply_state(part, page.records, to.no_sources, 2, nullptr) !=
                        ApplyResult::unavailable);
                if (page.done) break;
                after = page.last;
            }
        }
    };
    copy_all(7);
    for (auto part : {StatePart::links, StatePart::images, StatePart::indexes, StatePart::tags}) {
        INFO("part " << static_cast<int>(part));
        auto whole = from.meta.state_page(nullptr, part, "", 1000, 1 << 20, false);
        CHECK(to.meta.state_hash(part, "", whole.last) == whole.hash);
    }
    CHECK(to.tag_digest("b", "multi") == sha256(index).str());
    CHECK(to.meta.tag("b", "t2")->deleted());
    CHECK(to.meta.manifest("b", images[4])->deleted);
    CHECK_FALSE(to.meta.has_link("b", extra.str()));
    CHECK(to.meta.manifest("a/one", images[1])->bytes == from.meta.manifest("a/one", images[1])->bytes);

    // Again, in other pages: nothing new is written or logged.
    const auto head = to.meta.log_head();
    copy_all(1000);
    CHECK(to.meta.log_head() == head);
}
