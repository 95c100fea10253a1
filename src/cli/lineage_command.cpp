// berth lineage: what is built on a base, from a store's index (docs/policies.md).
#include <filesystem>
#include <iostream>

#include "berth/http/answers.hpp"
#include "berth/registry/lineage.hpp"
#include "berth/storage/layout.hpp"
#include "berth/storage/meta_store.hpp"
#include "commands.hpp"

namespace berth::cli {

namespace {

constexpr const char* lineage_help = R"(Usage: berth lineage --root DIR [--json] REPOSITORY[:TAG|@DIGEST]

Lists every image in the store whose layers begin with the layers of any version
the base ever had (a tag's every digest, or one digest; TAG defaults to latest),
and whether each is on the version the tag names now. Opens the index read-only,
so it works beside a running berth. --json prints what GET /_berth/v1/lineage
answers, with every page. docs/policies.md.
)";

// REPOSITORY[:TAG|@DIGEST] as the query's repository and reference.
registry::LineageQuery base_of(const std::string& base) {
    registry::LineageQuery query;
    const auto at = base.find('@');
    const auto colon = base.rfind(':');
    if (at != std::string::npos) query.repository = base.substr(0, at), query.reference = base.substr(at + 1);
    else if (colon != std::string::npos && base.find('/', colon) == std::string::npos)
        query.repository = base.substr(0, colon), query.reference = base.substr(colon + 1);
    else query.repository = base, query.reference = "latest";
    return query;
}

}  // namespace

int lineage(const std::vector<std::string>& args) {
    auto arguments = parse_arguments(args, {"--root"}, {"--json"});
    if (arguments.help) {
        std::cout << lineage_help;
        return 0;
    }
    if (arguments.rest.size() != 1) throw UsageError("name one base: REPOSITORY[:TAG|@DIGEST]");
    const std::filesystem::path root = arguments.required("--root");
    auto query = base_of(arguments.rest.front());
    if (!std::filesystem::exists(storage::layout::meta_dir(root)))
        throw UsageError("no registry store at " + root.string());
    storage::MetaStore meta(storage::layout::meta_dir(root), storage::MetaStore::Mode::read_only);
    if (meta.setting(storage::layout::setting::lineage_indexed) != "1")
        throw UsageError("the store's lineage is not indexed yet: berth serve indexes it at start");
    query.limit = 1000;
    auto all = registry::lineage(meta, query);
    for (auto page = all; page.next;) {
        query.after = *page.next;
        page = registry::lineage(meta, query);
        all.derived.insert(all.derived.end(), page.derived.begin(), page.derived.end());
        all.next = page.next;
    }
    if (arguments.flag("--json")) {
        std::cout << http::lineage_json(all, "") << "\n";
        return 0;
    }
    std::cout << query.repository << ":" << query.reference << " is "
              << (all.digest.empty() ? std::string("gone") : all.digest) << "; " << all.versions.size()
              << " versions\n";
    for (auto& d : all.derived) {
        std::string tags;
        for (auto& tag : d.tags) tags += (tags.empty() ? "" : ",") + tag;
        std::cout << d.repository << "@" << d.digest << " [" << tags << "] on " << d.base_digest
                  << (d.current ? " (current)" : " (older)") << "\n";
    }
    std::cout << all.derived.size() << " images\n";
    return 0;
}

}  // namespace berth::cli
