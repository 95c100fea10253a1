// The lineage index (storage/layout.hpp's `lineage` column family) and the query over it
// (registry/lineage.hpp).
#include <algorithm>
#include <catch2/catch.hpp>

#include "berth/oci/error.hpp"
#include "berth/registry/lineage.hpp"
#include "berth/storage/layout.hpp"
#include "berth/storage/meta_store.hpp"
#include "fixtures.hpp"

using namespace berth;
using namespace berth::storage;
using Ref = MetaStore::ManifestRef;

namespace {

std::string digest_of(char c) { return "sha256:" + std::string(64, c); }

std::string image(const std::vector<char>& layers, char config = 'c') {
    std::vector<test::Descriptor> listed;
    for (char c : layers) listed.push_back({"application/vnd.oci.image.layer.v1.tar+gzip", digest_of(c), 1});
    return test::image_manifest({"application/vnd.oci.image.config.v1+json", digest_of(config), 1}, listed);
}

std::string index(const std::vector<std::string>& children) {
    std::vector<test::Descriptor> listed;
    for (auto& child : children) listed.push_back({test::image_type, child, 1});
    return test::index_manifest(listed);
}

std::vector<std::string> layers(const std::vector<char>& names) {
    std::vector<std::string> out;
    for (char c : names) out.push_back(digest_of(c));
    return out;
}

// Manifests and tags written into the index directly, stamped by a counter.
struct Store : test::StoreFixture {
    std::uint64_t next_stamp = 1;

    std::string put(const std::string& repo, const std::string& bytes, const std::string& tag = {}) {
        auto digest = oci::Digest::of(oci::DigestAlgorithm::sha256, bytes);
        MetaStore::Batch batch;
        batch.record_manifest(repo, digest, oci::parse_manifest(bytes, ""), bytes, {next_stamp++, "r"});
        if (!tag.empty()) batch.record_tag(repo, tag, digest.str(), {next_stamp++, "r"});
        meta.commit(batch);
        return digest.str();
    }
    void remove(const std::string& repo, const std::string& digest) {
        auto current = meta.manifest(repo, digest);
        MetaStore::Batch batch;
        batch.tombstone_manifest(repo, digest, &*current, {next_stamp++, "r"});
        meta.commit(batch);
    }
};

}  // namespace

TEST_CASE("the lineage index finds manifests by whole layer list and by leading layers") {
    Store s;
    auto base = s.put("base/debian", image({'1'}), "bookworm");
    auto app = s.put("tools/app", image({'1', '2'}), "v1");
    auto other = s.put("tools/other", image({'3', '1'}));
    CHECK(s.meta.with_layers(layers({'1'}), 10) == std::vector<Ref>{{"base/debian", base}});
    CHECK(s.meta.with_layers(layers({'1', '2'}), 10) == std::vector<Ref>{{"tools/app", app}});
    CHECK(s.meta.built_on(layers({'1'}), {}, 10) == std::vector<Ref>{{"base/debian", base}, {"tools/app", app}});
    CHECK(s.meta.built_on(layers({'1'}), {"base/debian", base}, 10) == std::vector<Ref>{{"tools/app", app}});
    CHECK(s.meta.built_on(layers({'3'}), {}, 10) == std::vector<Ref>{{"tools/other", other}});
    CHECK(s.meta.built_on(layers({'2'}), {}, 10).empty());  // a layer in the middle is no beginning

    s.remove("tools/app", app);  // a tombstone takes its entries away
    CHECK(s.meta.with_layers(layers({'1', '2'}), 10).empty());
    CHECK(s.meta.built_on(layers({'1'}), {}, 10) == std::vector<Ref>{{"base/debian", base}});
}

TEST_CASE("an image's bases are the images its leading layers are, longest first, never itself") {
    Store s;
    auto debian = s.put("base/debian", image({'1'}), "bookworm");
    auto python = s.put("base/python", image({'1', '2'}), "3");
    auto copy = s.put("mirror/python", image({'1', '2'}, 'd'));
    s.put("tools/app", image({'1', '2', '3'}), "v1");
    using Found = std::vector<std::pair<std::size_t, Ref>>;
    auto bases = s.meta.bases_of(layers({'1', '2', '3'}), 128, 16);
    std::sort(bases.begin(), bases.begin() + 2);  // the two of length 2 in either order
    CHECK(bases == Found{{2, {"base/python", python}}, {2, {"mirror/python", copy}}, {1, {"base/debian", debian}}});
    CHECK(s.meta.bases_of(layers({'1', '2', '3'}), 1, 16) == Found{{1, {"base/debian", debian}}});
    CHECK(s.meta.bases_of(layers({'1', '2', '3'}), 128, 1).size() == 2);  // one per length
    CHECK(s.meta.bases_of(layers({'1'}), 128, 16).empty());               // a proper prefix only
    CHECK(s.meta.bases_of(layers({'9', '1'}), 128, 16).empty());
}

TEST_CASE("a tag's history outlives its moves and its deletion") {
    Store s;
    auto first = s.put("base/debian", image({'1'}), "bookworm");
    auto second = s.put("base/debian", image({'2'}), "bookworm");
    MetaStore::Batch batch;
    batch.record_tag("base/debian", "bookworm", "", {s.next_stamp++, "r"});
    s.meta.commit(batch);
    CHECK(s.meta.tag_history("base/debian", "bookworm") == std::vector<std::string>{first, second});
    CHECK(s.meta.tags_ever("base/debian", first) == std::vector<std::string>{"bookworm"});
    std::vector<std::string> seen;
    s.meta.visit_tag_history("base/", [&](auto& repo, auto& tag, auto& digest) {
        seen.push_back(repo + ":" + tag + "@" + digest);
        return true;
    });
    CHECK(seen.size() == 2);

    auto listed = s.put("base/multi", index({first}), "1");
    CHECK(s.meta.indexes_listing("base/multi", first) == std::vector<std::string>{listed});
}

TEST_CASE("lineage lists what begins with any version of a base, the longest version first, a page at a time") {
    Store s;
    auto old_base = s.put("base/debian", image({'1'}), "bookworm");
    auto new_base = s.put("base/debian", image({'1', '2'}), "bookworm");  // extends the old one
    auto on_old = s.put("tools/a", image({'1', '9'}), "v1");
    auto on_new = s.put("tools/b", image({'1', '2', '8'}), "v1");
    s.put("tools/c", image({'7'}), "v1");

    registry::LineageQuery query{"base/debian", "bookworm", {}, 10, nullptr};
    auto answer = registry::lineage(s.meta, query);
    CHECK(answer.digest == new_base);
    CHECK(answer.versions == std::vector<std::string>{old_base, new_base});
    REQUIRE(answer.derived.size() == 2);
    CHECK(answer.derived[0].repository == "tools/a");
    CHECK(answer.derived[0].digest == on_old);
    CHECK(answer.derived[0].base_digest == old_base);
    CHECK_FALSE(answer.derived[0].current);
    CHECK(answer.derived[0].tags == std::vector<std::string>{"v1"});
    CHECK(answer.derived[1].digest == on_new);
    CHECK(answer.derived[1].base_digest == new_base);
    CHECK(answer.derived[1].current);
    CHECK_FALSE(answer.next);

    query.limit = 1;
    auto first = registry::lineage(s.meta, query);
    REQUIRE(first.next);
    query.after = *first.next;
    auto second = registry::lineage(s.meta, query);
    REQUIRE(second.derived.size() == 1);
    CHECK(second.derived[0].digest == on_new);

    query = {"base/debian", "bookworm", {}, 10, [](const std::string& repo) { return repo != "tools/a"; }};
    CHECK(registry::lineage(s.meta, query).derived.size() == 1);
    query.reference = "trixie";
    CHECK_THROWS_AS(registry::lineage(s.meta, query), oci::Error);
    CHECK(registry::parse_lineage_cursor("tools/a@" + on_old) == Ref{"tools/a", on_old});
    CHECK_FALSE(registry::parse_lineage_cursor("tools/a"));
}

TEST_CASE("indexing a whole store at start finds live manifests and every tag, never a deleted manifest") {
    Store s;
    auto live = s.put("tools/a", image({'1', '2'}), "v1");
    auto gone = s.put("tools/b", image({'1', '2'}), "v1");
    s.remove("tools/b", gone);
    CHECK_FALSE(s.meta.setting(layout::setting::lineage_indexed));
    s.meta.index_lineage();
    CHECK(s.meta.setting(layout::setting::lineage_indexed) == "1");
    CHECK(s.meta.with_layers(layers({'1', '2'}), 10) == std::vector<Ref>{{"tools/a", live}});
    CHECK(s.meta.tags_ever("tools/a", live) == std::vector<std::string>{"v1"});
}
