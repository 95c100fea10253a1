#include <catch2/catch.hpp>

#include "berth/registry/policies.hpp"
#include "trust/formats.hpp"

using namespace berth;

TEST_CASE("the first policy whose repositories match applies") {
    std::vector<registry::Policy> policies(2);
    policies[0].name = "special";
    policies[0].repositories = {"prod/special/**"};
    policies[1].name = "prod";
    policies[1].repositories = {"prod/**"};
    policies[1].rules = {registry::immutable_tags_rule(), registry::signature_rule()};
    CHECK(registry::policy_for(policies, "prod/special/app")->name == "special");
    CHECK(registry::policy_for(policies, "prod/app")->name == "prod");
    CHECK(registry::policy_for(policies, "dev/app") == nullptr);
    // What a policy's rules say of it, rule by rule.
    CHECK(policies[1].keeps_tags());
    CHECK(policies[1].judges_reads());
    CHECK_FALSE(policies[0].keeps_tags());
    CHECK_FALSE(policies[0].judges_reads());
    policies[0].rules = {registry::base_images_rule({"base/*:*"})};
    CHECK_FALSE(policies[0].keeps_tags());
    CHECK_FALSE(policies[0].judges_reads());
}

TEST_CASE("a signature's docker-reference names the repository under any of its names") {
    using trust::names_repository;
    CHECK(names_repository("prod/app", "prod/app"));
    CHECK(names_repository("prod/app:v1", "prod/app"));
    CHECK(names_repository("registry.example/prod/app", "prod/app"));
    CHECK(names_repository("registry.example:5000/prod/app:v1", "prod/app"));
    CHECK(names_repository("localhost/prod/app@sha256:" + std::string(64, '0'), "prod/app"));
    CHECK(names_repository("docker.io/library/nginx", "docker.io/library/nginx"));
    CHECK(names_repository("index.docker.io/library/nginx:1.25", "docker.io/library/nginx"));
    CHECK_FALSE(names_repository("prod/other", "prod/app"));
    CHECK_FALSE(names_repository("evil/prod/app", "prod/app"));  // "evil" is no host
    CHECK_FALSE(names_repository("registry.example/prod/app/x", "prod/app"));
    CHECK_FALSE(names_repository("", "prod/app"));
}

TEST_CASE("DSSE's pre-authentication encoding counts bytes") {
    CHECK(trust::pae("application/vnd.in-toto+json", "{}") == "DSSEv1 28 application/vnd.in-toto+json 2 {}");
}

TEST_CASE("malformed signatures are reasons, never exceptions") {
    const auto digest = *oci::Digest::parse("sha256:" + std::string(64, 'a'));
    const std::string repo = "prod/app";
    const trust::Expectation expected{digest, repo, true};
    const trust::Keys none;
    for (auto annotations :
         {"", "[]", "{\"dev.cosignproject.cosign/signature\":7}", "{\"dev.cosignproject.cosign/signature\":\"!!\"}"})
        CHECK_FALSE(trust::judge_simple_signing("{}", annotations, none, expected).empty());
    for (auto bundle :
         {"", "null", "{\"mediaType\":\"application/vnd.dev.sigstore.bundle.v0.3+json\"}",
          "{\"mediaType\":\"application/vnd.dev.sigstore.bundle.v0.3+json\",\"dsseEnvelope\":"
          "{\"payloadType\":\"application/vnd.in-toto+json\",\"payload\":\"e30=\",\"signatures\":[1,{}]}}"})
        CHECK_FALSE(trust::judge_bundle(bundle, none, expected).empty());
}
