// notify/: what receivers are told (ids, sequences, formats), the progress replicas merge, and the
// overtaken changes a replica's log keeps so that it can tell them.
#include <catch2/catch.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "berth/oci/digest.hpp"
#include "berth/oci/manifest.hpp"
#include "berth/notify/notifications.hpp"
#include "berth/storage/hybrid_clock.hpp"
#include "berth/storage/meta_store.hpp"
#include "notify/notice.hpp"
#include "notify/progress.hpp"
#include "notify/webhook.hpp"
#include "temp_dir.hpp"

using namespace berth;
using notify::Progress;
using storage::Event;

namespace {

Event tag_event(std::uint64_t clock, std::string origin, std::string tag,
                std::string digest = "sha256:" + std::string(64, 'a')) {
    return {Event::Type::tag, "team/app", std::move(digest), std::move(tag), {clock, std::move(origin)}};
}

}  // namespace

TEST_CASE("an event's id and sequence come from the change alone") {
    TempDir dir;
    storage::MetaStore meta(dir.path() / "meta");
    const auto a = notify::notice_of(tag_event(100 << 16, "berth-0", "v1"), "");
    const auto again = notify::notice_of(tag_event(100 << 16, "berth-0", "v1"), "");
    const auto other_tag = notify::notice_of(tag_event(100 << 16, "berth-0", "v2"), "");
    const auto later = notify::notice_of(tag_event(101 << 16, "berth-0", "v1"), "");
    REQUIRE(a);
    CHECK(a->id == again->id);
    CHECK(a->id.size() == 32);
    CHECK(a->id != other_tag->id);
    CHECK(a->id != later->id);
    CHECK(a->sequence < later->sequence);
    CHECK(a->action == notify::Action::tag);
    // A push and its tag share a stamp: the manifest sorts first.
    const Event push{Event::Type::manifest, "team/app", "sha256:" + std::string(64, 'a'), "", {100 << 16, "berth-0"}};
    CHECK(notify::sequence_of(push) < a->sequence);
    // Links are not told.
    CHECK_FALSE(notify::noticed({Event::Type::link, "team/app", "sha256:" + std::string(64, 'a'), "", {1, "x"}}));
    // A retention's delete says so, a mirror's push too.
    Event gone{Event::Type::tag_deleted, "team/app", "", "v1", {5, "x"}, "retention"};
    CHECK(notify::notice_of(gone, "")->action == notify::Action::retention);
    CHECK(notify::notice_of(push, "docker.io")->action == notify::Action::mirror);
}

TEST_CASE("the formats say what the receivers' schemas expect") {
    TempDir dir;
    storage::MetaStore meta(dir.path() / "meta");
    const auto n = *notify::notice_of(tag_event(100 << 16, "berth-0", "v1"), "");
    const auto ce = nlohmann::json::parse(notify::cloudevent_json(n));
    CHECK(ce["specversion"] == "1.0");
    CHECK(ce["type"] == "io.berth.tag");
    CHECK(ce["subject"] == "team/app:v1");
    CHECK(ce["sequence"] == n.sequence);
    const auto batch = nlohmann::json::parse(notify::cloudevents_batch_json({n, n}));
    CHECK(batch.is_array());
    CHECK(batch.size() == 2);
    const auto distribution = nlohmann::json::parse(notify::distribution_json({n}));
    CHECK(distribution["events"][0]["action"] == "push");
    CHECK(distribution["events"][0]["target"]["tag"] == "v1");
    CHECK(distribution["events"][0]["id"] == n.id);
}

TEST_CASE("a signature is HMAC-SHA256 over the time and the body") {
    // The value a receiver computes: hmac.new(b"Jefe", b"1.what do ya want for nothing?", sha256).
    CHECK(notify::signature("Jefe", 1, "what do ya want for nothing?") ==
          "t=1,sha256=a9049465ce89cfb8e9aac62333abda66f80e3403f51f57f6bae3c3a4485eca38");
    CHECK(notify::signature("k", 1, "b") != notify::signature("k", 2, "b"));
    CHECK(notify::signature("k", 1, "b") != notify::signature("k", 1, "c"));
}

TEST_CASE("progress merges to the furthest, and a replay wins over older progress") {
    Progress a, b;
    a.pass({10, "berth-0"});
    b.pass({20, "berth-0"});
    b.pass({5, "berth-1"});
    a.merge(b);
    CHECK(a.covers({20, "berth-0"}));
    CHECK_FALSE(a.covers({21, "berth-0"}));
    CHECK(a.covers({5, "berth-1"}));
    CHECK_FALSE(a.covers({6, "berth-1"}));
    Progress replay;
    replay.generation = 7;
    replay.floor = 3;
    a.merge(replay);
    CHECK(a.generation == 7);
    CHECK_FALSE(a.covers({20, "berth-0"}));
    CHECK(a.covers({3, "berth-2"}));
    // Older progress after a replay changes nothing.
    a.merge(b);
    CHECK_FALSE(a.covers({20, "berth-0"}));
    // Disabling and enabling: the later one holds.
    Progress off;
    off.disabled = 9;
    a.merge(off);
    CHECK(a.is_disabled());
    Progress on;
    on.enabled = 10;
    a.merge(on);
    CHECK_FALSE(a.is_disabled());
    CHECK(notify::parse_progress(notify::encode_progress(a)) == a);
    CHECK(notify::parse_progress_map("[1,2]").empty());
    // A peer's reason is printable ASCII, bounded; its origins are bounded too.
    auto told = notify::parse_progress(R"({"g":0,"f":0,"o":{},"d":1,"dr":"a\u00e9\nb"})");
    REQUIRE(told);
    CHECK(told->disabled_reason == "ab");
    Progress many;
    for (int i = 0; i < 1100; ++i) many.origins["r" + std::to_string(i)] = 1;
    Progress mine;
    mine.merge(many);
    CHECK(mine.origins.empty());
    CHECK(notify::parse_progress_map(R"({"x":{"g":"no"}})").empty());
    // A clock is a whole number: a float (undefined as an integer) or a negative one is no progress.
    CHECK_FALSE(notify::parse_progress(R"({"g":1e300,"f":0,"o":{}})"));
    CHECK_FALSE(notify::parse_progress(R"({"g":0,"f":0,"o":{"r":-1}})"));
}

TEST_CASE("an event names who asked for it, as a peer may tell it: printable and bounded") {
    auto event = tag_event(5, "berth-0", "v1");
    event.principal = "alice";
    auto parsed = Event::parse(event.json());
    REQUIRE(parsed);
    CHECK(parsed->principal == "alice");
    auto notice = notify::notice_of(*parsed, "");
    REQUIRE(notice);
    CHECK(nlohmann::json::parse(notify::cloudevent_json(*notice))["data"]["principal"] == "alice");
    CHECK(nlohmann::json::parse(notify::distribution_json({*notice}))["events"][0]["actor"]["name"] == "alice");
    for (auto bad : {std::string(300, 'a'), std::string("al\\nice"), std::string("\u00e9")}) {
        auto told = Event::parse(R"({"type":"tag","repo":"a","clock":1,"origin":"r","tag":"t","digest":"d","by":")" +
                                 bad + "\"}");
        REQUIRE(told);
        CHECK(told->principal.empty());
    }
}

TEST_CASE("a tag move a newer one overtook is logged once, and its tag still names the newer") {
    TempDir dir;
    storage::MetaStore meta(dir.path() / "meta");
    const auto digest = "sha256:" + std::string(64, 'b');
    storage::MetaStore::Batch newer;
    newer.record_tag("team/app", "v1", digest, {200, "berth-1"});
    meta.commit(newer);
    CHECK_FALSE(meta.tag_named_at("team/app", "v1", "sha256:" + std::string(64, 'c')));
    storage::MetaStore::Batch overtaken;
    overtaken.record_overtaken_tag("team/app", "v1", "sha256:" + std::string(64, 'c'), {100, "berth-0"});
    meta.commit(overtaken);
    CHECK(meta.tag("team/app", "v1")->digest == digest);
    CHECK(meta.tag_named_at("team/app", "v1", "sha256:" + std::string(64, 'c')) == 100u);
    auto log = meta.read_log(0, 10);
    REQUIRE(log.size() == 2);
    CHECK(Event::parse(log[1].event)->stamp.clock == 100);
}

TEST_CASE("pulls are counted only for an endpoint that hears of them, and a full tally goes early") {
    TempDir dir;
    storage::MetaStore meta(dir.path() / "meta");
    storage::HybridClock clock(storage::system_wall_clock());
    notify::Options options;
    notify::Endpoint prod;
    prod.name = "prod";
    prod.url = "http://127.0.0.1:9/hook";  // refuses: counts wait
    prod.actions = static_cast<unsigned>(notify::Action::pull);
    prod.repositories = {"prod/**"};
    options.endpoints.push_back(prod);
    options.pull_interval = std::chrono::hours(1);
    notify::Notifications notifications(
        options, meta, clock, dir.path() / "notifications", nullptr, [](const std::string&) { return std::string(); },
        "r1");
    notifications.start();
    auto uncounted = [&] {
        observe::MetricsWriter out;
        notifications.write_metrics(out);
        const auto text = out.text();
        const auto at = text.find("\nberth_notify_pulls_uncounted_total ");
        REQUIRE(at != std::string::npos);
        return std::stod(text.substr(text.find(' ', at + 1)));
    };
    auto digest = [](int i) { return oci::Digest::of(oci::DigestAlgorithm::sha256, std::to_string(i)).str(); };
    // Pulls no endpoint hears of fill nothing. Were they counted, 30,000 distinct ones would fill
    // the tally thrice, faster than its early takes (a second apart), and some would go uncounted.
    for (int i = 0; i < 30000; ++i) notifications.pulled("pub/x", digest(i));
    CHECK(uncounted() == 0);
    CHECK(notifications.status().at(0).pulls_waiting == 0);
    // 10,000 distinct ones fill the tally: it is taken at once, not an hour later.
    for (int i = 0; i < 10000; ++i) notifications.pulled("prod/app", digest(i));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (notifications.status().at(0).pulls_waiting < 10000 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling the worker's queue
    REQUIRE(notifications.status().at(0).pulls_waiting == 10000);
    notifications.pulled("prod/app", digest(10001));
    CHECK(uncounted() == 0);
}
