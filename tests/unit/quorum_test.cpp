// The write quorum as Replicator::replicate decides it, against stand-in
// peers on loopback that acknowledge, refuse or never answer the apply request.
#include <catch2/catch.hpp>

#include "berth/oci/error.hpp"
#include "berth/replication/protocol.hpp"
#include "berth/replication/replicator.hpp"
#include "error_code.hpp"
#include "fixtures.hpp"
#include "stand_in_peer.hpp"

using namespace berth;

namespace {

using test::StandInPeer;

// This replica's stores and a Replicator whose peers are the stand-ins.
struct Writer : test::StoreFixture {
    Writer(std::vector<StandInPeer*> peers, replication::WriteQuorum quorum) {
        replication::Options options;
        for (auto* peer : peers) options.peers.push_back(peer->address());
        options.secret = "a-secret-of-enough-characters";
        options.write_quorum = quorum;
        options.quorum_timeout = std::chrono::milliseconds(300);
        replicator = std::make_unique<replication::Replicator>(options, "writer", blobs, meta, clock, pulls);
    }

    std::unique_ptr<replication::Replicator> replicator;
};

const std::vector<storage::Event> tag_event = {
    {storage::Event::Type::tag, "r", "sha256:" + std::string(64, 'a'), "v1", {7, "writer"}}};

using Mode = StandInPeer::Mode;

}  // namespace

TEST_CASE("quorum reached: the write returns once a majority holds it", "[replication][quorum]") {
    StandInPeer a(Mode::ack), b(Mode::refuse);
    {
        Writer writer({&a, &b}, replication::WriteQuorum::quorum);
        writer.replicator->replicate(tag_event);  // itself and a: two of three
    }
    CHECK(a.applies() == 1);
    CHECK(b.applies() == 1);
    auto pushed = replication::protocol::parse_apply(a.last_body());
    REQUIRE(pushed);
    REQUIRE(pushed->events.size() == 1);
    CHECK(pushed->events[0].tag == "v1");
}

TEST_CASE("quorum not reached: every peer refused, the write fails at once", "[replication][quorum]") {
    StandInPeer a(Mode::refuse), b(Mode::refuse);
    {
        Writer writer({&a, &b}, replication::WriteQuorum::quorum);
        CHECK(code_of([&] { writer.replicator->replicate(tag_event); }) == oci::ErrorCode::unavailable);
    }
    CHECK(a.applies() == 1);
    CHECK(b.applies() == 1);
}

TEST_CASE("quorum timed out: a peer that never answers fails the write", "[replication][quorum]") {
    StandInPeer a(Mode::refuse), b(Mode::stall);
    {
        Writer writer({&a, &b}, replication::WriteQuorum::quorum);
        CHECK(code_of([&] { writer.replicator->replicate(tag_event); }) == oci::ErrorCode::unavailable);
    }                         // waits for the push to the stalled peer to give up
    CHECK(b.applies() == 1);  // it got the events; it only never said so
}

TEST_CASE("write quorum all needs every peer; local asks none", "[replication][quorum]") {
    StandInPeer a(Mode::ack), b(Mode::refuse);
    {
        Writer all({&a, &b}, replication::WriteQuorum::all);
        CHECK(code_of([&] { all.replicator->replicate(tag_event); }) == oci::ErrorCode::unavailable);
    }
    {
        Writer local({&a, &b}, replication::WriteQuorum::local);
        local.replicator->replicate(tag_event);
    }
    CHECK(a.applies() == 1);  // from `all` only
    StandInPeer c(Mode::ack), d(Mode::ack);
    Writer all({&c, &d}, replication::WriteQuorum::all);
    all.replicator->replicate(tag_event);
    CHECK(c.applies() == 1);
    CHECK(d.applies() == 1);
}
