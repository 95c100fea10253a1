// The peer protocol's encodings and version negotiation.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "berth/oci/digest.hpp"
#include "berth/oci/encoding.hpp"
#include "berth/replication/protocol.hpp"
#include "berth/storage/events.hpp"

using namespace berth;
namespace protocol = replication::protocol;

TEST_CASE("protocol versions: ranges that overlap are compatible") {
    auto mine = protocol::parse_versions(protocol::versions_text());
    REQUIRE(mine);
    CHECK(mine->oldest == protocol::oldest);
    CHECK(mine->newest == protocol::version);
    CHECK(protocol::compatible(*mine));

    auto missing = protocol::parse_versions("");  // a berth from before versions were exchanged
    REQUIRE(missing);
    CHECK(missing->oldest == 1);
    CHECK(missing->newest == 1);

    CHECK(protocol::compatible({1, protocol::version + 5}));  // a newer peer that still speaks ours
    CHECK_FALSE(protocol::compatible({protocol::version + 1, protocol::version + 2}));  // moved on
    CHECK(protocol::incompatibility({7, 9}).find("7-9") != std::string::npos);

    for (auto bad : {"1", "-1", "2-1", "0-1", "a-b", "1-", "1-2-3", " 1-1", "1-99999999999"})
        CHECK_FALSE(protocol::parse_versions(bad));
}

TEST_CASE("protocol targets and operations name each other") {
    using protocol::Operation;
    auto path_of = [](const std::string& target) {
        REQUIRE(target.starts_with(protocol::prefix));
        auto path = target.substr(protocol::prefix.size());
        return path.substr(0, path.find('?'));
    };
    CHECK(protocol::operation_of(path_of(protocol::log_target(5, 10))) == Operation::log);
    CHECK(protocol::log_target(5, 10).ends_with("log?after=5&limit=10"));
    protocol::StateRequest state{storage::StatePart::indexes, std::string("r\0sha", 5), 10, "s1", 7, true};
    CHECK(protocol::operation_of(path_of(protocol::state_target(state))) == Operation::state);
    CHECK(protocol::state_target(state).ends_with("state?part=indexes&after=" + oci::hex(state.after) +
                                                  "&limit=10&session=s1&since=7&summary=1"));
    CHECK(protocol::operation_of(path_of(protocol::apply_target())) == Operation::apply);
    const std::string digest = "sha256:" + std::string(64, 'a');
    auto blob = path_of(protocol::blob_target(digest));
    CHECK(protocol::operation_of(blob) == Operation::blob);
    CHECK(protocol::content_digest(blob) == digest);
    auto manifest = path_of(protocol::manifest_target("a/b", digest));
    CHECK(protocol::operation_of(manifest) == Operation::manifest);
    CHECK(protocol::content_digest(manifest) == digest);
    CHECK(protocol::manifest_target("a/b", digest).ends_with("?repo=a/b"));
    CHECK(protocol::record_target("r", protocol::RecordKind::tag, "v1").ends_with("record?repo=r&tag=v1"));
    CHECK(protocol::operation_of("nonsense") == Operation::unknown);
}

TEST_CASE("protocol pages of state survive the wire") {
    for (auto name : {"links", "images", "indexes", "tags"}) CHECK(protocol::parse_part(name));
    CHECK_FALSE(protocol::parse_part("snapshot"));
    const std::string raw("repo\0tag\xff", 9);
    CHECK(protocol::unhex(oci::hex(raw)) == raw);
    CHECK_THROWS_AS(protocol::unhex("abc"), std::invalid_argument);
    CHECK_THROWS_AS(protocol::unhex("zz"), std::invalid_argument);

    protocol::StatePageAnswer answer{"berth-0", "e1", "s1", 42, {}};
    answer.page.records.push_back({"a/b", "sha256:x", {5, "berth-0"}, false, "", "application/json", "{}"});
    answer.page.records.push_back({"a/b", "v1", {6, "berth-1"}, true, "", "", ""});
    answer.page.last = raw;
    answer.page.done = true;
    answer.page.hash = "h";
    auto back = protocol::parse_state(protocol::encode_state(answer));
    CHECK(back.replica == "berth-0");
    CHECK(back.session == "s1");
    CHECK(back.head == 42);
    CHECK(back.page.last == raw);
    CHECK(back.page.done);
    REQUIRE(back.page.records.size() == 2);
    CHECK(back.page.records[0].bytes == "{}");
    CHECK(back.page.records[0].stamp == storage::Stamp{5, "berth-0"});
    CHECK(back.page.records[1].deleted);
    CHECK_THROWS(protocol::parse_state(R"({"replica":"x"})"));
}

TEST_CASE("protocol stamps travel as clock and origin") {
    auto object = protocol::stamp_json({42, "berth-1"});
    CHECK(object == nlohmann::json{{"clock", 42}, {"origin", "berth-1"}});
    CHECK(protocol::stamp_of(object) == storage::Stamp{42, "berth-1"});
    CHECK_THROWS_AS(protocol::stamp_of(nlohmann::json{{"clock", "x"}}), nlohmann::json::exception);
}

TEST_CASE("protocol apply requests carry events and manifest bytes, checked against their digests") {
    const std::string bytes = R"({"schemaVersion":2})";
    const auto digest = oci::Digest::of(oci::DigestAlgorithm::sha256, bytes).str();
    protocol::ApplyRequest request;
    request.events.push_back({storage::Event::Type::manifest, "r", digest, {}, {7, "a"}});
    request.events.push_back({storage::Event::Type::tag, "r", digest, "v1", {7, "a"}});
    request.manifests.push_back({"r", digest, "application/vnd.oci.image.manifest.v1+json", bytes});
    request.manifests.push_back({"r", "sha256:" + std::string(64, 'b'), "x", bytes});  // bytes of another digest

    auto parsed = protocol::parse_apply(protocol::encode_apply(request));
    REQUIRE(parsed);
    REQUIRE(parsed->events.size() == 2);
    CHECK(parsed->events[1].tag == "v1");
    CHECK(parsed->events[1].stamp == storage::Stamp{7, "a"});
    REQUIRE(parsed->manifests.size() == 1);  // the mismatched one is left out
    CHECK(parsed->manifests[0].bytes == bytes);
    CHECK(parsed->manifests[0].media_type == "application/vnd.oci.image.manifest.v1+json");

    auto events_only = protocol::parse_apply(R"({"events":[]})");  // an older replica sends no manifests
    REQUIRE(events_only);
    CHECK(events_only->manifests.empty());
    for (auto bad : {"", "[]", R"({"events":{}})", R"({"events":[{"type":"bogus"}]})",
                     R"({"events":[],"manifests":{}})", R"({"events":[],"manifests":[{"repo":1}]})"})
        CHECK_FALSE(protocol::parse_apply(bad));
}

TEST_CASE("pull times travel as [name, ms] pairs, paged", "[retention]") {
    protocol::PullsPage page{{{"v1", 1000}, {"sha256:" + std::string(64, 'a'), 2000}}, true};
    auto parsed = protocol::parse_pulls(protocol::encode_pulls(page));
    REQUIRE(parsed);
    CHECK(parsed->pulls == page.pulls);
    CHECK(parsed->more);
    CHECK_FALSE(protocol::parse_pulls("{}"));
    CHECK_FALSE(protocol::parse_pulls("not json"));
    CHECK_FALSE(protocol::parse_pulls(R"({"pulls":[["v1","x"]],"more":false})"));
    CHECK(protocol::pulls_target("a/b", 5, "") == "/_berth/v1/pulls?repo=a/b&since=5");
    CHECK(protocol::pulls_target("a/b", 5, "sha256+x:1").find("&after=sha256%2Bx:1") != std::string::npos);
    CHECK(protocol::operation_of("pulls") == protocol::Operation::pulls);
}

TEST_CASE("a log page round-trips and a broken one is refused") {
    protocol::LogPage page{"r1", "e1", 7, 3, true, {{4, "event-4"}, {5, "event-5"}}};
    auto back = protocol::parse_log_page(protocol::encode_log_page(page));
    CHECK(back.replica == "r1");
    CHECK(back.epoch == "e1");
    CHECK(back.head == 7);
    CHECK(back.first == 3);
    CHECK(back.filling);
    CHECK(back.entries == page.entries);
    CHECK_THROWS_AS(protocol::parse_log_page(R"({"replica":"r1"})"), std::invalid_argument);
    CHECK_THROWS_AS(protocol::parse_log_page(R"({"replica":"r1","epoch":"e","head":1,"entries":[{"seq":"x"}]})"),
                    std::invalid_argument);
    CHECK_THROWS_AS(protocol::parse_log_page(std::string(4000, '[')), std::invalid_argument);
    // The replica it names keys a cursor here: only what a replica id can be.
    for (auto* id : {"", "R1", "r1/../x", "r\n1", "r_1"})
        CHECK_THROWS_AS(protocol::parse_log_page(nlohmann::json{
                            {"replica", id}, {"epoch", "e"}, {"head", 0}, {"entries", nlohmann::json::array()}}
                                                     .dump()),
                        std::invalid_argument);
    CHECK_THROWS_AS(protocol::parse_log_page(protocol::encode_log_page({std::string(64, 'r'), "e", 0, 0, false, {}})),
                    std::invalid_argument);
    CHECK(protocol::parse_log_page(protocol::encode_log_page({std::string(63, 'r'), "e", 0, 0, false, {}})).replica ==
          std::string(63, 'r'));
}

TEST_CASE("tag claims travel as the protocol says and refuse what is no claim") {
    namespace protocol = berth::replication::protocol;
    const std::string digest = "sha256:" + std::string(64, 'a');
    auto claim = protocol::parse_claim(protocol::encode_claim({"prod/app", "v1", digest, 1234}));
    REQUIRE(claim);
    CHECK(claim->repo == "prod/app");
    CHECK(claim->tag == "v1");
    CHECK(claim->digest == digest);
    CHECK(claim->expires_ms == 1234);
    for (auto bad : {"", "[]", "{}", R"({"repo":"Prod","tag":"v1","digest":"sha256:aa"})",
                     R"({"repo":"prod/app","tag":"v 1","digest":"sha256:aa"})"})
        CHECK_FALSE(protocol::parse_claim(bad));
    auto answer = protocol::parse_claim_answer(protocol::encode_claim_answer({false, digest}));
    CHECK_FALSE(answer.granted);
    CHECK(answer.digest == digest);
    CHECK_THROWS_AS(protocol::parse_claim_answer(R"({"granted":"yes"})"), std::invalid_argument);
}

TEST_CASE("a replica's status survives the wire, and what is no status is refused") {
    protocol::Status status{"berth-1", "0123456789abcdef", 42, false, 7, {}};
    protocol::PeerState peer;
    peer.address = "berth-0.berth:5000";
    peer.id = "berth-0";
    peer.reachable = true;
    peer.cursor = 10;
    peer.head = 12345;
    peer.lag_seconds = 1.5;
    peer.last_error = "timeout";
    peer.bootstrap_part = "tags";
    peer.bootstrap_records = 99;
    status.peers.push_back(peer);
    auto parsed = protocol::parse_status(protocol::encode_status(status));
    REQUIRE(parsed);
    CHECK(parsed->replica == "berth-1");
    CHECK(parsed->log_head == 42);
    CHECK_FALSE(parsed->ready);
    REQUIRE(parsed->peers.size() == 1);
    CHECK(parsed->peers[0].address == peer.address);
    CHECK(parsed->peers[0].head - parsed->peers[0].cursor == 12335);
    CHECK(parsed->peers[0].lag_seconds == 1.5);
    CHECK(parsed->peers[0].bootstrap_part == "tags");
    CHECK(parsed->peers[0].bootstrap_records == 99);
    CHECK_FALSE(protocol::parse_status(R"({"replica":"x"})"));
    CHECK_FALSE(protocol::parse_status("[[[["));
}

TEST_CASE("replica ids: what names one, and the id made from a configured name or a host name") {
    CHECK(protocol::valid_replica_id("berth-0"));
    CHECK(protocol::valid_replica_id(std::string(63, 'a')));
    CHECK_FALSE(protocol::valid_replica_id(""));
    CHECK_FALSE(protocol::valid_replica_id(std::string(64, 'a')));
    CHECK_FALSE(protocol::valid_replica_id("Berth-0"));
    CHECK_FALSE(protocol::valid_replica_id("a/../b"));

    CHECK(protocol::replica_id_from("Berth-0.cluster.local") == "berth-0clusterlocal");
    CHECK(protocol::replica_id_from("../") == "berth");
    CHECK(protocol::replica_id_from(std::string(70, 'X')) == std::string(63, 'x'));
    for (const std::string name : {std::string(), std::string("ÄÖ"), std::string("node_1"), std::string(100, '-')})
        CHECK(protocol::valid_replica_id(protocol::replica_id_from(name)));
}
