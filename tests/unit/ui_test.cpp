// The web UI's views (ui/views.hpp) over a registry on real stores: what each JSON answer says of
// the content pushed, how lists page and hide what the caller may not pull, and that the views
// only read.
#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "berth/oci/error.hpp"
#include "berth/registry/policies.hpp"
#include "berth/registry/retention.hpp"
#include "berth/replication/protocol.hpp"
#include "berth/ui/views.hpp"
#include "error_code.hpp"
#include "fixtures.hpp"

using namespace berth;
using nlohmann::json;
using oci::ErrorCode;
using test::digest_of;

namespace {

constexpr const char* oci_config = "application/vnd.oci.image.config.v1+json";
constexpr const char* tar_layer = "application/vnd.oci.image.layer.v1.tar";

json descriptor(const std::string& media_type, const std::string& content) {
    return {{"mediaType", media_type}, {"digest", digest_of(content)}, {"size", content.size()}};
}

// What a view answered; json::parse throws on invalid UTF-8, so every answer is checked for it.
json parsed(const std::string& text) { return json::parse(text); }

std::vector<std::string> names_of(const json& answer) {
    std::vector<std::string> names;
    for (auto& repository : answer["repositories"]) names.push_back(repository["name"]);
    return names;
}

struct Pushed {
    std::string digest, body;
};

struct Views : test::RegistryFixture {
    explicit Views(test::RegistrySetup setup = {}) : RegistryFixture(std::move(setup)) {}

    registry::Contents contents() const { return reg.contents(); }

    // A runnable image: an OCI config blob and a tar layer per entry of layers (each blob pushed to
    // repo), with annotations and a subject when given; pushed under tag, or by digest when empty.
    Pushed push_image(const std::string& repo, const std::string& tag, const std::string& config,
                      const std::vector<std::string>& layers, const json& annotations = nullptr,
                      const std::string& subject = "") {
        push_blob(repo, config);
        json doc = {{"schemaVersion", 2},
                    {"mediaType", test::image_type},
                    {"config", descriptor(oci_config, config)},
                    {"layers", json::array()}};
        for (auto& layer : layers) {
            push_blob(repo, layer);
            doc["layers"].push_back(descriptor(tar_layer, layer));
        }
        if (!annotations.is_null()) doc["annotations"] = annotations;
        if (!subject.empty()) doc["subject"] = {{"mediaType", test::image_type}, {"digest", subject}, {"size", 1}};
        auto body = doc.dump();
        return {reg.put_manifest(repo, tag.empty() ? digest_of(body) : tag, "", body).digest.str(), body};
    }

    // Repositories named names, written to the index directly as the applier writes a peer's
    // links: many of them in one commit.
    void add_repositories(const std::vector<std::string>& names) {
        storage::MetaStore::Batch batch;
        for (auto& name : names) batch.record_link(name, digest_of("shared"), {clock.now(), "test"}, false, 6);
        meta.commit(batch);
    }
};

// names[0..count) as prefix followed by a zero-padded number, in byte order.
std::vector<std::string> numbered(const std::string& prefix, std::size_t count) {
    std::vector<std::string> names;
    for (std::size_t i = 0; i < count; ++i) {
        auto number = std::to_string(i);
        names.push_back(prefix + std::string(5 - number.size(), '0') + number);
    }
    return names;
}

}  // namespace

TEST_CASE("whoami says who is signed in, whether anyone must, and what pull commands name", "[ui]") {
    CHECK(parsed(ui::whoami_json(std::nullopt, false, "")) ==
          json{{"user", nullptr}, {"auth", false}, {"registry", nullptr}});
    CHECK(parsed(ui::whoami_json("alice", true, "reg.example:5000")) ==
          json{{"user", "alice"}, {"auth", true}, {"registry", "reg.example:5000"}});
}

TEST_CASE("repositories page in name order, with their totals", "[ui]") {
    Views v;
    v.push("a/one", "v1", "one");
    v.now_ms += 5000;
    v.push("a/two", "v1", "two");
    v.push("a/two", "v2", "two-b");
    v.push("b/three", "v1", "three");
    v.push("c/four", "v1", "four");
    const auto contents = v.contents();

    auto first = parsed(ui::repositories_json(contents, {.limit = 2}, nullptr));
    CHECK(names_of(first) == std::vector<std::string>{"a/one", "a/two"});
    CHECK(first["next"] == "a/two");
    auto second = parsed(ui::repositories_json(contents, {.after = "a/two", .limit = 2}, nullptr));
    CHECK(names_of(second) == std::vector<std::string>{"b/three", "c/four"});
    CHECK(second["next"].is_null());
    // All at once: no next.
    auto all = parsed(ui::repositories_json(contents, {}, nullptr));
    CHECK(names_of(all) == std::vector<std::string>{"a/one", "a/two", "b/three", "c/four"});
    CHECK(all["next"].is_null());
    // A limit of 0 is one.
    auto one = parsed(ui::repositories_json(contents, {.limit = 0}, nullptr));
    CHECK(names_of(one) == std::vector<std::string>{"a/one"});
    CHECK(one["next"] == "a/one");

    // Totals: tags, manifests, each blob once, the last push's wall time; no pull noted.
    const auto& two = all["repositories"][1];
    CHECK(two["tags"] == 2);
    CHECK(two["manifests"] == 2);
    const std::uint64_t blobs = std::string("config-two").size() + std::string("layer-two").size() +
                                std::string("config-two-b").size() + std::string("layer-two-b").size();
    CHECK(two["bytes"] == blobs);
    CHECK(two["last_push"] == test::wall_ms + 5000);
    CHECK(two["last_pull"].is_null());
    CHECK(all["repositories"][0]["last_push"] == test::wall_ms);
    CHECK(all["repositories"][0]["tags"] == 1);
}

TEST_CASE("a repository search matches any part of the name; lists hide what the caller may not pull", "[ui]") {
    Views v;
    for (auto repo : {"a/one", "a/two", "b/three", "c/four"}) v.push(repo, "v1", repo);
    const auto contents = v.contents();

    auto found = parsed(ui::repositories_json(contents, {.search = "o"}, nullptr));
    CHECK(names_of(found) == std::vector<std::string>{"a/one", "a/two", "c/four"});
    CHECK(found["next"].is_null());
    auto paged = parsed(ui::repositories_json(contents, {.search = "o", .limit = 1}, nullptr));
    CHECK(names_of(paged) == std::vector<std::string>{"a/one"});
    CHECK(paged["next"] == "a/one");
    paged = parsed(ui::repositories_json(contents, {.search = "o", .after = "a/one", .limit = 1}, nullptr));
    CHECK(names_of(paged) == std::vector<std::string>{"a/two"});
    CHECK(paged["next"] == "a/two");
    auto none = parsed(ui::repositories_json(contents, {.search = "zzz"}, nullptr));
    CHECK(none["repositories"].empty());
    CHECK(none["next"].is_null());

    const ui::MayPull not_two = [](const std::string& repo) { return repo != "a/two"; };
    auto visible = parsed(ui::repositories_json(contents, {}, not_two));
    CHECK(names_of(visible) == std::vector<std::string>{"a/one", "b/three", "c/four"});
    // A page of two skips the hidden name and goes on past it.
    auto page = parsed(ui::repositories_json(contents, {.limit = 2}, not_two));
    CHECK(names_of(page) == std::vector<std::string>{"a/one", "b/three"});
    CHECK(page["next"] == "b/three");
    const ui::MayPull nothing = [](const std::string&) { return false; };
    auto hidden = parsed(ui::repositories_json(contents, {}, nothing));
    CHECK(hidden["repositories"].empty());
    CHECK(hidden["next"].is_null());
}

TEST_CASE("a page of repositories holds at most 200", "[ui]") {
    Views v;
    const auto names = numbered("r", 201);
    v.add_repositories(names);
    const auto contents = v.contents();
    for (std::size_t limit : {200u, 201u, 1000u}) {
        auto page = parsed(ui::repositories_json(contents, {.limit = limit}, nullptr));
        CHECK(page["repositories"].size() == 200);
        CHECK(page["next"] == names[199]);
    }
    auto rest = parsed(ui::repositories_json(contents, {.after = names[199], .limit = 1000}, nullptr));
    CHECK(names_of(rest) == std::vector<std::string>{names[200]});
    CHECK(rest["next"].is_null());
}

TEST_CASE("a search reads a bounded number of names; a page ending on a hidden one says so its own way", "[ui]") {
    Views v;
    const auto names = numbered("n", ui::max_names_read + 1);
    v.add_repositories(names);
    const auto contents = v.contents();
    const auto& last_read = names[ui::max_names_read - 1];
    std::vector<std::string> asked;
    ui::RepositoryListQuery query{.search = "zzz", .hidden_cursor = [&](const std::string& name) {
                                      asked.push_back(name);
                                      return "sealed:" + name;
                                  }};

    // Nothing matches: the page stops after max_names_read names, with a next to read on from.
    auto page = parsed(ui::repositories_json(contents, query, nullptr));
    CHECK(page["repositories"].empty());
    CHECK(page["next"] == last_read);
    CHECK(asked.empty());  // the last name read is visible: as it is

    // The last name read is one the caller may not see: the cursor is written for it.
    const ui::MayPull not_last = [&](const std::string& repo) { return repo != last_read; };
    page = parsed(ui::repositories_json(contents, query, not_last));
    CHECK(page["next"] == "sealed:" + last_read);
    CHECK(asked == std::vector<std::string>{last_read});
    // Without a hidden_cursor, as it is.
    query.hidden_cursor = nullptr;
    page = parsed(ui::repositories_json(contents, query, not_last));
    CHECK(page["next"] == last_read);

    // Reading on from there finds the rest.
    query.after = last_read;
    query.search = "n";
    page = parsed(ui::repositories_json(contents, query, nullptr));
    CHECK(names_of(page) == std::vector<std::string>{names.back()});
    CHECK(page["next"].is_null());
}

TEST_CASE("a repository's tags: digests, sizes, push times, paging", "[ui]") {
    Views v;
    const auto image = v.push_image("app", "v1", R"({"os":"linux"})", {"layer-one", "layer-two"});
    v.now_ms += 1000;
    const auto artifact = v.push("app", "v2", "artifact");
    const auto contents = v.contents();

    auto repo = parsed(ui::repository_json(contents, {.repository = "app"}));
    CHECK(repo["name"] == "app");
    CHECK(repo["tags_total"] == 2);
    CHECK(repo["manifests"] == 2);
    CHECK(repo["mirrored"] == false);
    CHECK(repo["last_push"] == test::wall_ms + 1000);
    CHECK(repo["next"].is_null());
    REQUIRE(repo["tags"].size() == 2);
    const auto& v1 = repo["tags"][0];
    CHECK(v1["tag"] == "v1");
    CHECK(v1["digest"] == image.digest);
    CHECK(v1["mediaType"] == test::image_type);
    // Manifest, config and layers.
    CHECK(v1["size"] == image.body.size() + std::string(R"({"os":"linux"})").size() + 18);
    CHECK(v1["pushed"] == test::wall_ms);
    CHECK(v1["last_pull"].is_null());
    CHECK(v1["immutable"] == false);
    CHECK(v1["platforms"].is_null());
    CHECK(v1["signature"] == "unsigned");
    CHECK(v1["signature_detail"].is_null());
    const auto& v2 = repo["tags"][1];
    CHECK(v2["tag"] == "v2");
    CHECK(v2["digest"] == artifact);
    CHECK(v2["pushed"] == test::wall_ms + 1000);
    CHECK(v2["signature"].is_null());  // an artifact is no image to sign

    auto first = parsed(ui::repository_json(contents, {.repository = "app", .limit = 1}));
    REQUIRE(first["tags"].size() == 1);
    CHECK(first["tags"][0]["tag"] == "v1");
    CHECK(first["next"] == "v1");
    CHECK(first["tags_total"] == 2);
    auto rest = parsed(ui::repository_json(contents, {.repository = "app", .after = "v1", .limit = 0}));
    REQUIRE(rest["tags"].size() == 1);
    CHECK(rest["tags"][0]["tag"] == "v2");
    CHECK(rest["next"].is_null());

    CHECK(code_of([&] { ui::repository_json(contents, {.repository = "missing"}); }) == ErrorCode::name_unknown);
    CHECK(code_of([&] { ui::repository_json(contents, {.repository = "Not A Name"}); }) == ErrorCode::name_invalid);
}

TEST_CASE("an index's tag lists its platforms and counts its children's content", "[ui]") {
    Views v;
    const auto amd64 = v.push_image("multi", "", R"({"architecture":"amd64"})", {"amd64-layer"});
    const auto arm64 = v.push_image("multi", "", R"({"architecture":"arm64"})", {"arm64-layer"});
    const auto attestation = v.push("multi", "", "attestation");
    json index = {{"schemaVersion", 2}, {"mediaType", test::index_type}, {"manifests", json::array()}};
    auto child = [&](const std::string& digest, const json& platform) {
        json entry = {{"mediaType", test::image_type}, {"digest", digest}, {"size", 0}};
        entry["size"] = v.meta.manifest("multi", digest)->bytes.size();
        if (!platform.is_null()) entry["platform"] = platform;
        index["manifests"].push_back(entry);
    };
    child(amd64.digest, {{"os", "linux"}, {"architecture", "amd64"}});
    child(arm64.digest, {{"os", "linux"}, {"architecture", "arm64"}, {"variant", "v8"}});
    child(attestation, {{"os", "unknown"}, {"architecture", "unknown"}});
    const auto body = index.dump();
    v.reg.put_manifest("multi", "latest", test::index_type, body);

    auto repo = parsed(ui::repository_json(v.contents(), {.repository = "multi"}));
    REQUIRE(repo["tags"].size() == 1);
    const auto& latest = repo["tags"][0];
    CHECK(latest["mediaType"] == test::index_type);
    CHECK(latest["platforms"] == json::array({"linux/amd64", "linux/arm64/v8"}));
    // The index, and each child with its config and layers.
    const auto child_size = [&](const Pushed& image, const std::string& config, const std::string& layer) {
        return image.body.size() + config.size() + layer.size();
    };
    const auto attestation_body = v.meta.manifest("multi", attestation)->bytes;
    CHECK(latest["size"] == body.size() + child_size(amd64, R"({"architecture":"amd64"})", "amd64-layer") +
                                child_size(arm64, R"({"architecture":"arm64"})", "arm64-layer") +
                                attestation_body.size() + std::string("config-attestation").size() +
                                std::string("layer-attestation").size());
    CHECK(latest["signature"] == "unsigned");
}

TEST_CASE("a tag is signed when a cosign signature tag or a signature referrer names its manifest", "[ui]") {
    Views v;
    const auto image = v.push_image("app", "v1", R"({"os":"linux"})", {"layer"});
    const auto other = v.push_image("app", "v2", R"({"os":"linux","v":2})", {"layer-2"});
    auto signature_of = [&](const std::string& tag) {
        const auto repo = parsed(ui::repository_json(v.contents(), {.repository = "app"}));
        for (auto& entry : repo["tags"])
            if (entry["tag"] == tag) return entry["signature"];
        FAIL("no tag " << tag);
        return json();
    };
    CHECK(signature_of("v1") == "unsigned");

    const auto sig_tag = registry::signature_tag(*oci::Digest::parse(image.digest));
    CHECK(sig_tag == "sha256-" + image.digest.substr(7) + ".sig");
    v.push("app", sig_tag, "signature");
    CHECK(signature_of("v1") == "signed");
    CHECK(signature_of("v2") == "unsigned");
    CHECK(signature_of(sig_tag).is_null());  // the signature itself is an attachment
    CHECK(parsed(ui::manifest_json(v.contents(), "app", "v1", nullptr))["signature"] == "signed");

    // A referrer whose artifactType says signature.
    json referrer = {{"schemaVersion", 2},
                     {"mediaType", test::image_type},
                     {"artifactType", "application/vnd.dev.cosign.artifact.sig.v1+json"},
                     {"config", descriptor("application/vnd.oci.empty.v1+json", "{}")},
                     {"layers", json::array({descriptor("application/octet-stream", "sig-bytes")})},
                     {"subject", {{"mediaType", test::image_type}, {"digest", other.digest}, {"size", 1}}}};
    v.push_blob("app", "{}");
    v.push_blob("app", "sig-bytes");
    const auto body = referrer.dump();
    v.reg.put_manifest("app", digest_of(body), "", body);
    CHECK(signature_of("v2") == "signed");
}

// A policy's keys as the views ask them: a reason per digest ("" for signed), "unsigned" otherwise.
struct FakeSignatures : registry::SignatureCheck {
    std::map<std::string, std::string> reasons;
    std::vector<std::string> asked;
    std::string unsigned_reason(const std::string& policy, const std::string& repo,
                                const oci::Digest& digest) override {
        asked.push_back(policy + " " + repo);
        auto it = reasons.find(digest.str());
        return it == reasons.end() ? "unsigned" : it->second;
    }
};

TEST_CASE("where a policy requires signatures, a tag is verified, invalid or unsigned as its keys say", "[ui]") {
    FakeSignatures signatures;
    auto options = test::registry_options();
    registry::Policy policy;
    policy.name = "signed";
    policy.repositories = {"signed/**"};
    policy.rules = {registry::signature_rule()};
    options.policies = {policy};
    Views v({.options = options, .with = {.signatures = &signatures}});
    const auto good = v.push_image("signed/app", "good", R"({"os":"linux","n":1})", {"layer"});
    const auto bad = v.push_image("signed/app", "bad", R"({"os":"linux","n":2})", {"layer"});
    const auto none = v.push_image("signed/app", "none", R"({"os":"linux","n":3})", {"layer"});
    const auto sbom = v.push("signed/app", "sbom", "sbom");
    // A cosign tag is no signature where the policy's keys judge.
    v.push("signed/app", registry::signature_tag(*oci::Digest::parse(none.digest)), "sig");
    signatures.reasons = {{good.digest, ""}, {bad.digest, "no key matches"}, {sbom, "not judged"}};

    const auto repo = parsed(ui::repository_json(v.contents(), {.repository = "signed/app"}));
    std::map<std::string, std::pair<json, json>> states;
    for (auto& entry : repo["tags"]) states[entry["tag"]] = {entry["signature"], entry["signature_detail"]};
    CHECK(states["good"] == std::pair<json, json>{"verified", nullptr});
    CHECK(states["bad"] == std::pair<json, json>{"invalid", "no key matches"});
    CHECK(states["none"] == std::pair<json, json>{"unsigned", nullptr});
    CHECK(states["sbom"] == std::pair<json, json>{nullptr, nullptr});  // an attachment is not judged
    CHECK_FALSE(signatures.asked.empty());
    CHECK(signatures.asked.front() == "signed signed/app");

    auto view = parsed(ui::manifest_json(v.contents(), "signed/app", "bad", nullptr));
    CHECK(view["signature"] == "invalid");
    CHECK(view["signature_detail"] == "no key matches");
    view = parsed(ui::manifest_json(v.contents(), "signed/app", "good", nullptr));
    CHECK(view["signature"] == "verified");
    CHECK(view["signature_detail"].is_null());
    // An attachment is not judged here either, and the keys are not asked about it.
    signatures.asked.clear();
    view = parsed(ui::manifest_json(v.contents(), "signed/app", "sbom", nullptr));
    CHECK(view["signature"].is_null());
    CHECK(view["signature_detail"].is_null());
    CHECK(signatures.asked.empty());
}

TEST_CASE("tags under a policy with immutable tags say so", "[ui]") {
    auto options = test::registry_options();
    registry::Policy policy;
    policy.name = "prod";
    policy.repositories = {"prod/**"};
    policy.rules = {registry::immutable_tags_rule()};
    options.policies = {policy};
    Views v({.options = options});
    v.push_image("prod/app", "v1", R"({"os":"linux"})", {"layer"});
    v.push_image("dev/app", "v1", R"({"os":"linux"})", {"layer"});
    const auto contents = v.contents();

    CHECK(parsed(ui::repository_json(contents, {.repository = "prod/app"}))["tags"][0]["immutable"] == true);
    CHECK(parsed(ui::repository_json(contents, {.repository = "dev/app"}))["tags"][0]["immutable"] == false);
    CHECK(parsed(ui::manifest_json(contents, "prod/app", "v1", nullptr))["immutable_tags"] == json::array({"v1"}));
    CHECK(parsed(ui::manifest_json(contents, "dev/app", "v1", nullptr))["immutable_tags"] == json::array());
}

TEST_CASE("an image's manifest view: config as the image says it, layers, tags, annotations", "[ui]") {
    Views v;
    const json config = {{"created", "2024-01-02T03:04:05Z"},
                         {"author", "ann"},
                         {"os", "linux"},
                         {"architecture", "arm64"},
                         {"variant", "v8"},
                         {"config",
                          {{"Entrypoint", {"/bin/app"}},
                           {"Cmd", {"--serve", 8080}},
                           {"Env", {"A=1", "B=2"}},
                           {"WorkingDir", "/srv"},
                           {"User", "1000"},
                           {"Labels", {{"org.example.team", "infra"}, {"count", 3}}},
                           {"ExposedPorts", {{"8080/tcp", json::object()}, {"53/udp", json::object()}}}}},
                         {"history",
                          {{{"created", "2024-01-01T00:00:00Z"}, {"created_by", "RUN make"}, {"empty_layer", true}},
                           {{"created_by", "COPY app /bin/app"}, {"comment", "built"}}}}};
    const auto config_text = config.dump();
    const auto image = v.push_image("app", "v1", config_text, {"layer-a", "layer-bb"},
                                    {{"org.opencontainers.image.source", "https://example.com/app"}});
    v.reg.put_manifest("app", "stable", "", image.body);
    const auto contents = v.contents();

    auto view = parsed(ui::manifest_json(contents, "app", "v1", nullptr));
    CHECK(view["repository"] == "app");
    CHECK(view["reference"] == "v1");
    CHECK(view["digest"] == image.digest);
    CHECK(view["mediaType"] == test::image_type);
    CHECK(view["kind"] == "image");
    CHECK(view["artifact_type"].is_null());
    CHECK(view["tags"] == json::array({"stable", "v1"}));
    CHECK(view["annotations"] == json{{"org.opencontainers.image.source", "https://example.com/app"}});
    CHECK(view["platforms"] == json::array());
    CHECK(view["platforms_total"] == 0);
    CHECK(view["size"] == image.body.size() + config_text.size() + 15);
    CHECK(view["layers_total"] == 2);
    CHECK(view["layers_bytes"] == 15);
    REQUIRE(view["layers"].size() == 2);
    CHECK(view["layers"][1] == json{{"digest", digest_of("layer-bb")}, {"mediaType", tar_layer}, {"size", 8}});
    CHECK(view["subject"].is_null());
    CHECK(view["base"].is_null());
    CHECK(view["referrers"] == json::array());
    CHECK(view["referrers_total"] == 0);
    CHECK(view["signature"] == "unsigned");
    CHECK(view["immutable_tags"] == json::array());
    CHECK(view["raw_truncated"] == false);
    CHECK(view["raw"] == image.body);

    const auto& c = view["config"];
    CHECK(c["digest"] == digest_of(config_text));
    CHECK(c["mediaType"] == oci_config);
    CHECK(c["size"] == config_text.size());
    CHECK(c["created"] == "2024-01-02T03:04:05Z");
    CHECK(c["author"] == "ann");
    CHECK(c["os"] == "linux");
    CHECK(c["architecture"] == "arm64");
    CHECK(c["variant"] == "v8");
    CHECK(c["entrypoint"] == json::array({"/bin/app"}));
    CHECK(c["cmd"] == json::array({"--serve", "8080"}));  // the pusher's words, as text
    CHECK(c["env"] == json::array({"A=1", "B=2"}));
    CHECK(c["working_dir"] == "/srv");
    CHECK(c["user"] == "1000");
    CHECK(c["labels"] == json{{"count", "3"}, {"org.example.team", "infra"}});
    CHECK(c["exposed_ports"] == json::array({"53/udp", "8080/tcp"}));
    CHECK(c["history_total"] == 2);
    CHECK(c["history"] == json::array({{{"created", "2024-01-01T00:00:00Z"},
                                        {"created_by", "RUN make"},
                                        {"comment", nullptr},
                                        {"empty_layer", true}},
                                       {{"created", nullptr},
                                        {"created_by", "COPY app /bin/app"},
                                        {"comment", "built"},
                                        {"empty_layer", false}}}));

    // By digest: the same manifest.
    auto by_digest = parsed(ui::manifest_json(contents, "app", image.digest, nullptr));
    CHECK(by_digest["reference"] == image.digest);
    CHECK(by_digest["digest"] == image.digest);
    CHECK(by_digest["config"] == c);
}

TEST_CASE("a config blob that is not an image config's, or not JSON, is named but not read", "[ui]") {
    Views v;
    // An artifact: its config is named, its artifact type is the config's media type.
    const auto artifact = v.push("app", "sbom", "sbom");
    auto view = parsed(ui::manifest_json(v.contents(), "app", "sbom", nullptr));
    CHECK(view["kind"] == "artifact");
    CHECK(view["artifact_type"] == "application/vnd.example.config");
    CHECK(view["config"] == json{{"digest", digest_of("config-sbom")},
                                 {"mediaType", "application/vnd.example.config"},
                                 {"size", std::string("config-sbom").size()}});
    CHECK(view["signature"].is_null());
    CHECK(view["digest"] == artifact);

    // An image config that is not JSON: named, its fields null.
    v.push_image("app", "odd", "not json", {"layer"});
    view = parsed(ui::manifest_json(v.contents(), "app", "odd", nullptr));
    CHECK(view["kind"] == "image");
    CHECK(view["config"]["digest"] == digest_of("not json"));
    CHECK(view["config"]["os"].is_null());
    CHECK(view["config"]["entrypoint"].is_null());
    CHECK(view["config"]["history_total"] == 0);
}

TEST_CASE("an index's manifest view lists its platforms", "[ui]") {
    Views v;
    const auto child = v.push_image("multi", "", R"({"os":"linux"})", {"layer"});
    json index = {{"schemaVersion", 2},
                  {"mediaType", test::index_type},
                  {"annotations", {{"note", "hi"}}},
                  {"manifests",
                   {{{"mediaType", test::image_type},
                     {"digest", child.digest},
                     {"size", child.body.size()},
                     {"platform", {{"os", "linux"}, {"architecture", "amd64"}}},
                     {"annotations", {{"n", "one"}}}}}}};
    const auto body = index.dump();
    const auto digest = v.reg.put_manifest("multi", "latest", test::index_type, body).digest.str();

    auto view = parsed(ui::manifest_json(v.contents(), "multi", "latest", nullptr));
    CHECK(view["kind"] == "index");
    CHECK(view["digest"] == digest);
    CHECK(view["config"].is_null());
    CHECK(view["layers_total"] == 0);
    CHECK(view["annotations"] == json{{"note", "hi"}});
    CHECK(view["platforms_total"] == 1);
    CHECK(view["platforms"] == json::array({{{"digest", child.digest},
                                             {"mediaType", test::image_type},
                                             {"size", child.body.size()},
                                             {"platform", "linux/amd64"},
                                             {"annotations", {{"n", "one"}}}}}));
    CHECK(view["size"] == body.size() + child.body.size() + std::string(R"({"os":"linux"})").size() + 5);
    CHECK(view["base"].is_null());
}

TEST_CASE("a manifest view lists its referrers and names its subject", "[ui]") {
    Views v;
    const auto image = v.push_image("app", "v1", R"({"os":"linux"})", {"layer"});
    const auto sbom = v.push("app", "", "sbom", image.digest);
    const auto sbom_size = v.meta.manifest("app", sbom)->bytes.size();

    auto view = parsed(ui::manifest_json(v.contents(), "app", "v1", nullptr));
    CHECK(view["referrers_total"] == 1);
    CHECK(view["referrers"] == json::array({{{"digest", sbom},
                                             {"mediaType", test::image_type},
                                             {"artifact_type", "application/vnd.example.config"},
                                             {"size", sbom_size},
                                             {"annotations", json::object()}}}));
    CHECK(view["signature"] == "unsigned");  // an SBOM is no signature

    auto referrer = parsed(ui::manifest_json(v.contents(), "app", sbom, nullptr));
    CHECK(referrer["subject"] == json{{"digest", image.digest}, {"mediaType", test::image_type}, {"size", 1}});
    CHECK(referrer["referrers"] == json::array());
    CHECK(referrer["tags"] == json::array());
}

TEST_CASE("a manifest's base is another image whose layers begin its own, one the caller may pull", "[ui]") {
    Views v;
    const auto base = v.push_image("lib/base", "1.0", R"({"os":"linux","base":true})", {"base-1", "base-2"});
    const auto untagged = v.push_image("lib/other", "", R"({"os":"linux","other":true})", {"base-1", "base-2"});
    const auto shorter = v.push_image("lib/base", "0.1", R"({"os":"linux","short":true})", {"base-1"});
    const auto app = v.push_image("app", "v1", R"({"os":"linux","app":true})", {"base-1", "base-2", "app-3"});
    const auto contents = v.contents();

    // The longest prefix, a tagged one first.
    auto view = parsed(ui::manifest_json(contents, "app", "v1", nullptr));
    CHECK(view["base"] ==
          json{{"repository", "lib/base"}, {"digest", base.digest}, {"tags", json::array({"1.0"})}, {"layers", 2}});
    // Where lib/base is hidden, the untagged image of the same layers.
    const ui::MayPull no_base = [](const std::string& repo) { return repo != "lib/base"; };
    view = parsed(ui::manifest_json(contents, "app", "v1", no_base));
    CHECK(view["base"] ==
          json{{"repository", "lib/other"}, {"digest", untagged.digest}, {"tags", json::array()}, {"layers", 2}});
    // Where only app may be pulled: none.
    const ui::MayPull only_app = [](const std::string& repo) { return repo == "app"; };
    CHECK(parsed(ui::manifest_json(contents, "app", "v1", only_app))["base"].is_null());
    // The base of the base is the one-layer image, which has none.
    view = parsed(ui::manifest_json(contents, "lib/base", "1.0", nullptr));
    CHECK(view["base"]["digest"] == shorter.digest);
    CHECK(view["base"]["layers"] == 1);
    CHECK(view["layers_total"] == 2);
    CHECK(parsed(ui::manifest_json(contents, "lib/base", "0.1", nullptr))["base"].is_null());
    CHECK(parsed(ui::manifest_json(contents, "app", app.digest, nullptr))["base"]["digest"] == base.digest);
}

TEST_CASE("a manifest's raw text is cut at 64 KiB and stays valid UTF-8", "[ui]") {
    Views v;
    // An annotation of two-byte characters, placed so that the cut falls inside one.
    const std::string e_acute = "\xC3\xA9";
    std::string text;
    for (int i = 0; i < 40000; ++i) text += e_acute;
    auto image = v.push_image("app", "", R"({"os":"linux"})", {"layer"}, {{"note", text}});
    const auto at = image.body.find(e_acute);
    REQUIRE(at < ui::max_raw_bytes);
    if ((ui::max_raw_bytes - at) % 2 == 0) {
        text = "x" + text;
        image = v.push_image("app", "", R"({"os":"linux"})", {"layer"}, {{"note", text}});
    }
    REQUIRE((ui::max_raw_bytes - image.body.find(e_acute)) % 2 == 1);
    REQUIRE(image.body.size() > ui::max_raw_bytes);

    const auto answer = ui::manifest_json(v.contents(), "app", image.digest, nullptr);
    auto view = parsed(answer);  // throws if the answer held invalid UTF-8
    CHECK(view["raw_truncated"] == true);
    const auto raw = view["raw"].get<std::string>();
    // The whole characters before the cut, and the half one replaced.
    CHECK(raw.substr(0, ui::max_raw_bytes - 1) == image.body.substr(0, ui::max_raw_bytes - 1));
    CHECK(raw.substr(ui::max_raw_bytes - 1) == "\xEF\xBF\xBD");
    // The annotation itself, whole.
    CHECK(view["annotations"]["note"] == text);
}

TEST_CASE("annotations and config fields reach the views only as valid UTF-8", "[ui]") {
    Views v;
    // A manifest with invalid UTF-8 is refused at the push, so no view ever reads one.
    const std::string bad = "\xC3\x28";
    json doc = {{"schemaVersion", 2},
                {"mediaType", test::image_type},
                {"config", descriptor(oci_config, R"({"os":"linux"})")},
                {"layers", json::array({descriptor(tar_layer, "layer")})}};
    v.push_blob("app", R"({"os":"linux"})");
    v.push_blob("app", "layer");
    auto body = doc.dump();
    body.insert(body.size() - 1, R"(,"annotations":{"note":")" + bad + R"("})");
    CHECK(code_of([&] { v.reg.put_manifest("app", "bad", "", body); }) == ErrorCode::manifest_invalid);
    // A config blob holding invalid UTF-8 is named, its fields not read.
    v.push_image("app", "v1", R"({"os":"linux","author":")" + bad + R"("})", {"layer"});
    auto view = parsed(ui::manifest_json(v.contents(), "app", "v1", nullptr));
    CHECK(view["config"]["size"] == std::string(R"({"os":"linux","author":")" + bad + R"("})").size());
    CHECK(view["config"]["os"].is_null());
    CHECK(view["config"]["author"].is_null());
}

TEST_CASE("a manifest view of what is not there", "[ui]") {
    Views v;
    const auto image = v.push_image("app", "v1", R"({"os":"linux"})", {"layer"});
    v.push_image("other", "v2", R"({"os":"linux","other":1})", {"layer"});
    const auto contents = v.contents();
    CHECK(code_of([&] { ui::manifest_json(contents, "missing", "v1", nullptr); }) == ErrorCode::name_unknown);
    CHECK(code_of([&] { ui::manifest_json(contents, "Bad Name", "v1", nullptr); }) == ErrorCode::name_invalid);
    CHECK(code_of([&] { ui::manifest_json(contents, "app", "v2", nullptr); }) == ErrorCode::manifest_unknown);
    CHECK(code_of([&] { ui::manifest_json(contents, "app", "not a tag!", nullptr); }) == ErrorCode::manifest_invalid);
    // A digest this repository does not hold, one another repository does.
    const auto elsewhere = v.meta.tag("other", "v2")->digest;
    CHECK(code_of([&] { ui::manifest_json(contents, "app", elsewhere, nullptr); }) == ErrorCode::manifest_unknown);
    CHECK(code_of([&] { ui::manifest_json(contents, "app", digest_of("nothing"), nullptr); }) ==
          ErrorCode::manifest_unknown);
    // A deleted tag and a deleted manifest.
    v.reg.delete_manifest("app", image.digest);
    CHECK(code_of([&] { ui::manifest_json(contents, "app", image.digest, nullptr); }) == ErrorCode::manifest_unknown);
    CHECK(code_of([&] { ui::manifest_json(contents, "app", "v1", nullptr); }) == ErrorCode::manifest_unknown);
}

TEST_CASE("the views read pull times but never note a pull", "[ui]") {
    Views v({.note_pulls = true});
    v.push_image("app", "v1", R"({"os":"linux"})", {"layer"});
    const auto contents = v.contents();
    ui::repositories_json(contents, {}, nullptr);
    ui::repository_json(contents, {.repository = "app"});
    ui::manifest_json(contents, "app", "v1", nullptr);
    CHECK_FALSE(v.pulls.last("app", "v1"));
    CHECK(parsed(ui::repository_json(contents, {.repository = "app"}))["tags"][0]["last_pull"].is_null());

    // A client's pull is shown, as pull times keep it (rounded up to the hour).
    v.reg.get_manifest("app", "v1");
    const auto pulled = v.pulls.last("app", "v1");
    REQUIRE(pulled);
    CHECK(*pulled >= test::wall_ms);
    auto repo = parsed(ui::repository_json(contents, {.repository = "app"}));
    CHECK(repo["tags"][0]["last_pull"] == *pulled);
    CHECK(repo["last_pull"] == *pulled);
    CHECK(parsed(ui::repositories_json(contents, {}, nullptr))["repositories"][0]["last_pull"] == *pulled);
}

TEST_CASE("mirrors, retention and the cluster without upstreams, policies or peers", "[ui]") {
    Views v;
    v.push_image("app", "v1", R"({"os":"linux"})", {"layer"});
    CHECK(ui::mirrors_json(v.contents(), nullptr) == R"({"mirrors":[]})");
    CHECK(parsed(ui::retention_json(nullptr, "app")) ==
          json{{"repository", "app"}, {"policy", nullptr}, {"deletions", json::array()}});

    const auto log = v.reg.change_log();
    REQUIRE(log.entries > 0);
    auto cluster = parsed(ui::cluster_json("test", log, nullptr, nullptr));
    CHECK(cluster["self"] == "test");
    CHECK(cluster["problems"] == json::array());
    REQUIRE(cluster["replicas"].size() == 1);
    const auto& self = cluster["replicas"][0];
    CHECK(self["id"] == "test");
    CHECK(self["self"] == true);
    CHECK(self["reachable"] == true);
    CHECK(self["ready"] == true);
    CHECK(self["behind"] == 0);
    CHECK(self["address"].is_null());
    CHECK(self["protocol"] == replication::protocol::versions_text());
    CHECK(self["change_log"] == json{{"length", log.entries}, {"bytes", log.bytes}, {"oldest", log.oldest_ms}});
    CHECK(self["last_backup"].is_null());
    CHECK(self["error"].is_null());
}

TEST_CASE("retention's view says what its policy would delete now", "[ui]") {
    Views v;
    v.push("app", "old", "old");
    v.now_ms += 60'000;
    v.push("app", "new", "new");
    registry::RetentionPolicy keep_one;
    keep_one.name = "keep-one";
    keep_one.repositories = {"app"};
    keep_one.keep_last = 1;
    registry::RetentionOptions options;
    options.policies = {keep_one};
    registry::Retention retention(options, v.meta, v.clock, "test", v.pulls);

    auto view = parsed(ui::retention_json(&retention, "app"));
    CHECK(view["repository"] == "app");
    CHECK(view["policy"] == "keep-one");
    REQUIRE(view["deletions"].size() == 1);
    CHECK(view["deletions"][0]["kind"] == "tag");
    CHECK(view["deletions"][0]["reference"] == "old");
    CHECK_FALSE(view["deletions"][0]["reason"].get<std::string>().empty());
    // A dry run: nothing went.
    CHECK(v.tags("app") == std::vector<std::string>{"new", "old"});
    auto other = parsed(ui::retention_json(&retention, "elsewhere"));
    CHECK(other["policy"].is_null());
    CHECK(other["deletions"] == json::array());
}
