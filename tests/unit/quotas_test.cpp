// Quotas in the Registry: bytes and repositories per namespace, refused with DENIED, storing nothing.
#include <catch2/catch.hpp>
#include <atomic>
#include <thread>

#include "berth/oci/error.hpp"
#include "berth/registry/quotas.hpp"
#include "berth/registry/registry.hpp"
#include "error_code.hpp"
#include "fixtures.hpp"

using namespace berth;
using oci::ErrorCode;
using test::digest_of;

namespace {

// A registry under quota rules, over a store that outlives it.
struct Fixture : test::StoreFixture {
    std::unique_ptr<registry::Registry> reg;

    explicit Fixture(std::vector<registry::QuotaRule> quotas) { configure(std::move(quotas)); }

    // A registry with other rules over the same stores (as after a restart with a new configuration).
    void configure(std::vector<registry::QuotaRule> quotas) {
        auto options = test::registry_options();
        options.max_uploads = 64;
        options.max_uploads_per_client = 64;
        options.min_free_bytes = 0;
        options.quotas = std::move(quotas);
        reg = std::make_unique<registry::Registry>(options, blobs, meta, clock);
    }

    // Uploads content into repo; returns the digest or throws what finish_upload threw.
    std::string push_blob(const std::string& repo, const std::string& content) {
        return test::push_blob(*reg, repo, content);
    }

    std::string denial(const std::function<void()>& push) {
        try {
            push();
        } catch (const oci::Error& error) {
            CHECK(error.code() == ErrorCode::denied);
            CHECK(oci::http_status(error.code()) == 403);
            return error.what();
        }
        FAIL("expected DENIED");
        return {};
    }
};

const std::string empty_index = test::index_manifest({});

}  // namespace

TEST_CASE("the first rule whose glob matches a namespace applies to it", "[quotas]") {
    std::vector<registry::QuotaRule> rules{{"team-a", 1000, 0}, {"team-*", 10, 5}, {"*", 0, 0}};
    CHECK(registry::quota_for(rules, "team-a") == &rules[0]);
    CHECK(registry::quota_for(rules, "team-b") == &rules[1]);
    CHECK(registry::quota_for(rules, "other") == &rules[2]);
    CHECK(registry::quota_for({rules.begin(), rules.begin() + 2}, "other") == nullptr);
}

TEST_CASE("a byte quota refuses the upload that would pass it, and keeps none of it", "[quotas]") {
    Fixture f({{"team-*", 100, 0}});
    const std::string first(60, 'a'), second(60, 'b');
    auto a = f.push_blob("team-a/app", first);
    CHECK(f.meta.usage("team-a").bytes == 60);

    auto message = f.denial([&] { f.push_blob("team-a/app", second); });
    CHECK(message.find("quota exceeded: namespace team-a") == 0);
    CHECK(message.find("100 bytes") != std::string::npos);
    CHECK(message.find("holds 60") != std::string::npos);
    CHECK(message.find("would make it 120") != std::string::npos);
    const auto b = oci::Digest::of(oci::DigestAlgorithm::sha256, second);
    CHECK_FALSE(f.blobs.size(b));  // the refused bytes are gone
    CHECK_FALSE(f.meta.has_link("team-a/app", b.str()));
    CHECK(f.reg->uploads_in_progress() == 0);
    CHECK(f.meta.usage("team-a").bytes == 60);
    CHECK(std::filesystem::is_empty(test::scratch_dir(f.dir.path())));

    // The same blob again, in another repository of the namespace: it counts once, so it fits.
    CHECK(f.push_blob("team-a/other", first) == a);
    CHECK(f.meta.usage("team-a").bytes == 60);
    // Another namespace matching the same rule has a quota of its own.
    CHECK_NOTHROW(f.push_blob("team-b/app", second));
    // A namespace no rule matches has no limit.
    CHECK_NOTHROW(f.push_blob("free/app", std::string(1000, 'c')));

    // Exactly at the limit is allowed.
    CHECK_NOTHROW(f.push_blob("team-a/app", std::string(40, 'd')));
    CHECK(f.meta.usage("team-a").bytes == 100);
}

TEST_CASE("a cross-repository mount that would pass a byte quota is refused", "[quotas]") {
    Fixture f({{"small", 50, 0}});
    auto big = f.push_blob("big/app", std::string(80, 'x'));
    auto message = f.denial([&] { f.reg->mount_blob("small/app", big, "big/app"); });
    CHECK(message.find("namespace small") != std::string::npos);
    CHECK_FALSE(f.meta.has_link("small/app", big));
    CHECK(f.meta.usage("small").bytes == 0);

    auto fits = f.push_blob("big/app", std::string(20, 'y'));
    CHECK(f.reg->mount_blob("small/app", fits, "big/app").mounted);
    CHECK(f.meta.usage("small").bytes == 20);
}

TEST_CASE("a repository quota refuses whatever would create one more repository", "[quotas]") {
    Fixture f({{"ns", 0, 2}});
    f.push_blob("ns/a", "1");
    f.push_blob("ns/b", "2");
    auto message = f.denial([&] { f.push_blob("ns/c", "3"); });
    CHECK(message.find("may hold 2 repositories and holds 2; this push would make it 3") != std::string::npos);
    CHECK(f.denial([&] { f.reg->mount_blob("ns/c", digest_of("1"), "ns/a"); }).find("repositories") !=
          std::string::npos);
    // A manifest without blobs creates its repository by itself.
    f.denial([&] { f.reg->put_manifest("ns/c", "latest", "application/vnd.oci.image.index.v1+json", empty_index); });
    CHECK(f.reg->catalog(100, "").items == std::vector<std::string>{"ns/a", "ns/b"});
    CHECK(f.meta.usage("ns").repositories == 2);
    // Existing repositories take more.
    CHECK_NOTHROW(f.push_blob("ns/a", "4"));
    CHECK_NOTHROW(f.reg->put_manifest("ns/b", "latest", "application/vnd.oci.image.index.v1+json", empty_index));
}

TEST_CASE("a namespace over a lowered quota takes pushes that add nothing, and no more", "[quotas]") {
    Fixture f({});
    auto a = f.push_blob("ns/app", std::string(60, 'a'));
    f.push_blob("ns/other", std::string(60, 'b'));
    f.configure({{"ns", 50, 1}});
    // Over both limits already: a manifest of what is stored adds neither bytes nor repositories.
    const std::string manifest = test::image_manifest({"application/vnd.example.config", a, 60}, {});
    CHECK_NOTHROW(f.reg->put_manifest("ns/app", "v1", "application/vnd.oci.image.manifest.v1+json", manifest));
    CHECK_NOTHROW(f.push_blob("ns/other", std::string(60, 'a')));  // stored in the namespace already
    f.denial([&] { f.push_blob("ns/app", "c"); });
}

TEST_CASE("concurrent uploads at a byte quota never pass it together", "[quotas]") {
    Fixture f({{"ns", 35, 0}});
    constexpr int pushers = 8;
    std::atomic<int> accepted{0}, denied{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < pushers; ++i)
        threads.emplace_back([&, i] {
            try {
                f.push_blob("ns/app", std::string(10, static_cast<char>('a' + i)));
                ++accepted;
            } catch (const oci::Error& error) {
                if (error.code() == ErrorCode::denied) ++denied;
            }
        });
    for (auto& thread : threads) thread.join();
    CHECK(accepted == 3);
    CHECK(denied == pushers - 3);
    CHECK(f.meta.usage("ns").bytes == 30);
}

TEST_CASE("usage pages list every namespace with its rule, and metrics only those a rule matches", "[quotas]") {
    Fixture f({{"team-*", 1000, 10}});
    f.push_blob("team-a/app", std::string(10, 'a'));
    f.push_blob("team-a/lib", std::string(10, 'a'));
    f.push_blob("other/app", std::string(5, 'b'));
    auto page = f.reg->usage(std::nullopt, "");
    REQUIRE(page.items.size() == 2);
    CHECK_FALSE(page.more);
    CHECK(page.items[0].ns == "other");
    CHECK(page.items[0].rule == nullptr);
    CHECK(page.items[1].ns == "team-a");
    CHECK(page.items[1].usage.bytes == 10);
    CHECK(page.items[1].usage.repositories == 2);
    REQUIRE(page.items[1].rule);
    CHECK(page.items[1].rule->max_bytes == 1000);
    auto first = f.reg->usage(1, "");
    CHECK(first.more);
    CHECK(f.reg->usage(1, first.items.back().ns).items.at(0).ns == "team-a");

    CHECK(f.reg->any_repository("team-a", [](const std::string& repo) { return repo == "team-a/lib"; }));
    CHECK_FALSE(f.reg->any_repository("team-a", [](const std::string& repo) { return repo == "other/app"; }));

    f.denial([&] { f.push_blob("team-a/app", std::string(1000, 'c')); });
    berth::observe::MetricsWriter writer;
    f.reg->write_metrics(writer);
    auto text = writer.text();
    CHECK(text.find("berth_namespace_used_bytes{namespace=\"team-a\"} 10\n") != std::string::npos);
    CHECK(text.find("berth_namespace_repositories{namespace=\"team-a\"} 2\n") != std::string::npos);
    CHECK(text.find("berth_namespace_max_bytes{namespace=\"team-a\"} 1000\n") != std::string::npos);
    CHECK(text.find("berth_namespace_max_repositories{namespace=\"team-a\"} 10\n") != std::string::npos);
    CHECK(text.find("berth_quota_denied_total{quota=\"bytes\"} 1\n") != std::string::npos);
    CHECK(text.find("namespace=\"other\"") == std::string::npos);
}
