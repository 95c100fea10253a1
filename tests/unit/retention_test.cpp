// Retention policies (registry/retention.hpp) on real stores, with a wall
// clock the test moves: each rule, how they combine, pull tracking, and the
// untagged rule garbage collection shares.
#include <catch2/catch.hpp>

#include "berth/registry/maintenance.hpp"
#include "berth/registry/peers.hpp"
#include "berth/registry/registry.hpp"
#include "berth/registry/retention.hpp"
#include "berth/storage/pull_times.hpp"
#include "fixtures.hpp"

using namespace berth;
using registry::RetentionPolicy;

namespace {

constexpr std::uint64_t day_ms = 86400 * 1000;

// A registry noting pulls, its clock at a realistic time that pushes are stamped with.
struct Fixture : test::RegistryFixture {
    Fixture() : RegistryFixture({.note_pulls = true}) {}

    std::chrono::system_clock::time_point at(std::uint64_t ms) {
        return std::chrono::system_clock::time_point(std::chrono::milliseconds(ms));
    }

    // One round with a single policy for every repository; what went, as "tag r:t" / "manifest r@d".
    std::vector<std::string> run(RetentionPolicy policy, std::uint64_t when_ms, bool dry_run = false,
                                 registry::Peers* peers = nullptr, registry::RetentionReport* report = nullptr) {
        if (policy.repositories.empty()) policy.repositories = {"**"};
        policy.name = "test";
        registry::RetentionOptions options;
        options.policies = {policy};
        registry::Retention retention(options, meta, clock, "test", pulls, {.peers = peers});
        std::vector<std::string> went;
        auto result = retention.run(
            dry_run,
            [&](const registry::RetentionDeletion& d) {
                went.push_back(d.kind + " " + d.repo + (d.kind == "tag" ? ":" : "@") + d.reference);
            },
            at(when_ms));
        if (report) *report = result;
        return went;
    }
};

// The other replicas, as retention asks them.
class FakePeers : public registry::Peers {
public:
    bool mine = true;
    std::optional<std::vector<std::pair<std::string, std::uint64_t>>> pulls =
        std::vector<std::pair<std::string, std::uint64_t>>{};

    registry::Lookup fetch_blob(const std::string&, const oci::Digest&) override { return registry::Lookup::absent; }
    bool fetch_manifest(const std::string&, const std::string&) override { return false; }
    void replicate(const std::vector<storage::Event>&) override {}
    bool evaluates(const std::string&) override { return mine; }
    registry::TagClaim claim_tag(const std::string&, const std::string&, const std::string&) override {
        return {registry::TagClaim::Outcome::granted, {}, {}};
    }
    std::optional<std::vector<std::pair<std::string, std::uint64_t>>> pulls_elsewhere(const std::string&,
                                                                                      std::uint64_t) override {
        return pulls;
    }
};

}  // namespace

TEST_CASE("retention verdicts: keep rules win, every rule set must hold", "[retention]") {
    RetentionPolicy policy;
    policy.keep_last = 3;
    policy.keep_tags = {"v*"};
    policy.expire_tags = {"pr-*", "v-old*"};
    policy.expire_unpulled = std::chrono::seconds(86400);
    const std::uint64_t now = 10 * day_ms;
    auto verdict = [&](std::string_view tag, bool newest, std::uint64_t last_used, bool known = true) {
        return registry::tag_verdict(policy, {tag, newest, last_used}, now, known);
    };
    CHECK(verdict("pr-1", false, now - 2 * day_ms) ==
          "not among the 3 most recently pushed; matches expire_tags \"pr-*\"; neither pushed nor pulled for 1 day");
    CHECK(verdict("pr-1", true, 0).empty());                  // among the newest
    CHECK(verdict("v-old-1", false, 0).empty());              // keep_tags wins over expire_tags
    CHECK(verdict("main", false, 0).empty());                 // expire_tags does not match
    CHECK(verdict("pr-1", false, now - day_ms / 2).empty());  // pulled within the day
    CHECK(verdict("pr-1", false, now - day_ms) != "");        // exactly a day: gone
    CHECK(verdict("pr-1", false, 0, false).empty());          // pulls elsewhere unknown: kept

    RetentionPolicy only_last;
    only_last.keep_last = 1;
    CHECK(registry::tag_verdict(only_last, {"x", false, now}, now, false) == "not among the 1 most recently pushed");
    RetentionPolicy untagged_only;
    untagged_only.untagged_after = std::chrono::seconds(1);
    CHECK(registry::tag_verdict(untagged_only, {"x", false, 0}, now, true).empty());
}

TEST_CASE("keep_last keeps the most recently pushed tags, by push time, not by name", "[retention]") {
    Fixture f;
    for (auto tag : {"a", "b", "c", "d"}) {
        f.push("r", tag, tag);
        f.now_ms += 1000;
    }
    f.push("r", "a", "a2");  // pushed again: the newest now
    f.push("other", "z", "z");
    RetentionPolicy policy;
    policy.repositories = {"r"};
    policy.keep_last = 2;
    registry::RetentionReport report;
    auto went = f.run(policy, f.now_ms, false, nullptr, &report);
    CHECK(went == std::vector<std::string>{"tag r:b", "tag r:c"});
    CHECK(f.tags("r") == std::vector<std::string>{"a", "d"});
    CHECK(f.tags("other") == std::vector<std::string>{"z"});  // no policy matches it
    CHECK(report.tags_evaluated == 4);
    CHECK(report.tags_deleted == 2);
    CHECK(report.repositories == 1);
    // Nothing more to do: the next round deletes nothing.
    CHECK(f.run(policy, f.now_ms).empty());
}

TEST_CASE("keep_last breaks ties of one push by tag name, and keeps all when there are fewer", "[retention]") {
    Fixture f;
    f.reg.put_manifest("r", "t1", "", f.image("r", "x"), {"t2", "t3"});  // one stamp for three tags
    RetentionPolicy policy;
    policy.keep_last = 5;
    CHECK(f.run(policy, f.now_ms).empty());
    policy.keep_last = 2;
    CHECK(f.run(policy, f.now_ms) == std::vector<std::string>{"tag r:t1"});
    CHECK(f.tags("r") == std::vector<std::string>{"t2", "t3"});
}

TEST_CASE("expire_tags deletes matching tags; keep_tags wins over it", "[retention]") {
    Fixture f;
    for (auto tag : {"pr-1", "pr-2", "pr-keep", "v1", "latest"}) f.push("r", tag, tag);
    RetentionPolicy policy;
    policy.expire_tags = {"pr-*"};
    policy.keep_tags = {"pr-keep", "v*"};
    CHECK(f.run(policy, f.now_ms) == std::vector<std::string>{"tag r:pr-1", "tag r:pr-2"});
    CHECK(f.tags("r") == std::vector<std::string>{"latest", "pr-keep", "v1"});
}

TEST_CASE("keep_last with expire_tags deletes only matching tags beyond the newest", "[retention]") {
    Fixture f;
    for (auto tag : {"pr-1", "main", "pr-2", "pr-3"}) {
        f.push("r", tag, tag);
        f.now_ms += 1000;
    }
    RetentionPolicy policy;
    policy.keep_last = 2;
    policy.expire_tags = {"pr-*"};
    CHECK(f.run(policy, f.now_ms) == std::vector<std::string>{"tag r:pr-1"});
    CHECK(f.tags("r") == std::vector<std::string>{"main", "pr-2", "pr-3"});
}

TEST_CASE("expire_unpulled counts from the push, or the last pull of the tag or its digest", "[retention]") {
    Fixture f;
    const auto t0 = f.now_ms;
    f.push("r", "never", "n");
    f.push("r", "by-tag", "t");
    auto digest = f.push("r", "by-digest", "d");
    f.push("r", "flushed", "f");
    f.now_ms = t0 + day_ms;
    f.reg.get_manifest("r", "flushed");
    f.pulls.flush();  // this one on disk, the next two only noted in memory
    f.reg.get_manifest("r", "by-tag");
    f.reg.get_manifest("r", digest);
    f.reg.get_manifest("r", "never", registry::Asker::replica);  // a peer reading through is no pull
    f.now_ms = t0 + 2 * day_ms;
    f.push("r", "young", "y");

    RetentionPolicy policy;
    policy.expire_unpulled = std::chrono::seconds(2 * 86400);
    CHECK(f.run(policy, t0 + 2 * day_ms + 3600 * 1000) == std::vector<std::string>{"tag r:never"});
    CHECK(f.tags("r") == std::vector<std::string>{"by-digest", "by-tag", "flushed", "young"});
    // Pulls count rounded up to the hour; past that plus two days, only the young tag stays.
    CHECK(f.run(policy, t0 + 3 * day_ms + 2 * 3600 * 1000) ==
          std::vector<std::string>{"tag r:by-digest", "tag r:by-tag", "tag r:flushed"});
    CHECK(f.tags("r") == std::vector<std::string>{"young"});
}

TEST_CASE("expire_unpulled asks the other replicas, and keeps everything when one cannot answer", "[retention]") {
    Fixture f;
    const auto t0 = f.now_ms;
    f.push("r", "a", "a");
    f.push("r", "b", "b");
    RetentionPolicy policy;
    policy.expire_unpulled = std::chrono::seconds(86400);
    FakePeers peers;
    peers.pulls = std::nullopt;
    registry::RetentionReport report;
    CHECK(f.run(policy, t0 + 5 * day_ms, false, &peers, &report).empty());
    CHECK(report.unpulled_skipped == 1);

    peers.mine = false;  // another replica judges this repository
    peers.pulls = std::vector<std::pair<std::string, std::uint64_t>>{};
    CHECK(f.run(policy, t0 + 5 * day_ms, false, &peers, &report).empty());
    CHECK(report.repositories == 0);

    peers.mine = true;
    peers.pulls = std::vector<std::pair<std::string, std::uint64_t>>{{"b", t0 + 5 * day_ms}};  // pulled elsewhere
    CHECK(f.run(policy, t0 + 5 * day_ms, false, &peers) == std::vector<std::string>{"tag r:a"});
    CHECK(f.tags("r") == std::vector<std::string>{"b"});
}

TEST_CASE("untagged manifests go after their age; children of kept indexes and referrers of kept manifests stay",
          "[retention]") {
    Fixture f;
    const auto t0 = f.now_ms;
    auto tagged = f.push("r", "v1", "tagged");
    auto lone = f.push("r", "", "lone");
    auto child_of_gone = f.push("r", "", "child-gone");
    auto gone_index = f.push_index("r", "", {child_of_gone});
    auto child_of_kept = f.push("r", "", "child-kept");
    f.push_index("r", "index", {child_of_kept});
    auto referrer_kept = f.push("r", "", "sig-kept", tagged);
    auto referrer_gone = f.push("r", "", "sig-gone", lone);
    f.now_ms = t0 + 2 * day_ms;
    auto young = f.push("r", "", "young");

    RetentionPolicy policy;
    policy.untagged_after = std::chrono::seconds(86400);
    auto dry = f.run(policy, t0 + 2 * day_ms, true);
    auto went = f.run(policy, t0 + 2 * day_ms);
    CHECK(dry == went);
    std::sort(went.begin(), went.end());
    std::vector<std::string> expected{"manifest r@" + lone, "manifest r@" + child_of_gone, "manifest r@" + gone_index,
                                      "manifest r@" + referrer_gone};
    std::sort(expected.begin(), expected.end());
    CHECK(went == expected);
    for (auto& digest : {lone, child_of_gone, gone_index, referrer_gone}) CHECK_FALSE(f.live("r", digest));
    for (auto& digest : {tagged, child_of_kept, referrer_kept, young}) CHECK(f.live("r", digest));
}

TEST_CASE("an index goes before its children, a subject before its referrers", "[retention]") {
    Fixture f;
    const auto t0 = f.now_ms;
    auto child = f.push("r", "", "c");
    auto index = f.push_index("r", "", {child});
    auto referrer = f.push("r", "", "sig", index);
    RetentionPolicy policy;
    policy.untagged_after = std::chrono::seconds(60);
    auto went = f.run(policy, t0 + day_ms);
    CHECK(went == std::vector<std::string>{"manifest r@" + index, "manifest r@" + child, "manifest r@" + referrer});
}

TEST_CASE("tags retention deletes free their manifests for the untagged rule in the same round", "[retention]") {
    Fixture f;
    const auto t0 = f.now_ms;
    auto old = f.push("r", "pr-1", "old");
    auto kept = f.push("r", "main", "main");
    RetentionPolicy policy;
    policy.expire_tags = {"pr-*"};
    policy.untagged_after = std::chrono::seconds(3600);
    CHECK(f.run(policy, t0 + day_ms, true) == std::vector<std::string>{"tag r:pr-1", "manifest r@" + old});
    CHECK(f.tags("r") == std::vector<std::string>{"main", "pr-1"});  // the dry run changed nothing
    CHECK(f.live("r", old));
    CHECK(f.run(policy, t0 + day_ms) == std::vector<std::string>{"tag r:pr-1", "manifest r@" + old});
    CHECK(f.tags("r") == std::vector<std::string>{"main"});
    CHECK_FALSE(f.live("r", old));
    CHECK(f.live("r", kept));
}

TEST_CASE("the first policy whose repositories match a repository is its policy", "[retention]") {
    registry::RetentionOptions options;
    RetentionPolicy ci, rest;
    ci.name = "ci";
    ci.repositories = {"ci/**"};
    rest.name = "rest";
    rest.repositories = {"**"};
    options.policies = {ci, rest};
    CHECK(options.policy_for("ci/a/b")->name == "ci");
    CHECK(options.policy_for("team/app")->name == "rest");
    options.policies = {ci};
    CHECK(options.policy_for("team/app") == nullptr);
}

TEST_CASE("garbage collection's delete_untagged shares the rule: an index and its child go in one run",
          "[retention][gc]") {
    Fixture f;
    const auto t0 = f.now_ms;
    auto child = f.push("r", "", "c");
    auto index = f.push_index("r", "", {child});
    auto tagged = f.push("r", "v1", "t");
    registry::GcOptions options;
    options.delete_untagged = true;
    options.untagged_age = std::chrono::seconds(3600);
    auto report = registry::collect_garbage(f.blobs, f.meta, f.clock, "test", options, false, f.at(t0 + day_ms));
    CHECK(report.manifests == 2);
    CHECK_FALSE(f.live("r", child));
    CHECK_FALSE(f.live("r", index));
    CHECK(f.live("r", tagged));
}

TEST_CASE("pull times: rounded up to the hour, read from memory and disk, written once an hour moves",
          "[retention][pulls]") {
    Fixture f;
    const std::uint64_t hour = storage::PullTimes::resolution_ms;
    const std::uint64_t t = 1000 * hour + 1;
    f.pulls.pulled("r", "a", t);
    f.pulls.pulled("r", "a", t + 10);
    f.pulls.pulled("r", "b", t - 2 * hour);
    f.pulls.pulled("s", "a", t);
    using Pulls = std::vector<std::pair<std::string, std::uint64_t>>;
    CHECK(f.pulls.since("r", 0, "", 10) == Pulls{{"a", 1001 * hour}, {"b", 999 * hour}});
    CHECK(f.pulls.since("r", 1000 * hour, "", 10) == Pulls{{"a", 1001 * hour}});
    CHECK(f.pulls.since("r", 0, "a", 10) == Pulls{{"b", 999 * hour}});
    CHECK(f.pulls.since("r", 0, "", 1) == Pulls{{"a", 1001 * hour}});
    CHECK_FALSE(f.meta.pull_time("r", "a"));  // noted, not written
    f.pulls.flush();
    CHECK(f.meta.pull_time("r", "a") == 1001 * hour);
    CHECK(f.pulls.since("r", 0, "", 10) == Pulls{{"a", 1001 * hour}, {"b", 999 * hour}});
    f.pulls.pulled("r", "a", t - hour);  // older than what is written: stays as it is
    f.pulls.flush();
    CHECK(f.meta.pull_time("r", "a") == 1001 * hour);
    f.pulls.pulled("r", "c", t);
    CHECK(f.pulls.since("r", 0, "b", 10) == Pulls{{"c", 1001 * hour}});  // memory after disk
}

TEST_CASE("a tag's tombstone drops its pull time: pushed again, it starts from its push", "[retention][pulls]") {
    Fixture f;
    f.push("r", "t", "t");
    f.reg.get_manifest("r", "t");
    f.pulls.flush();
    CHECK(f.meta.pull_time("r", "t"));
    f.reg.delete_manifest("r", "t");
    CHECK_FALSE(f.meta.pull_time("r", "t"));
}
