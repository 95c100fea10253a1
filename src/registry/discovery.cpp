// Listing operations of the Registry: tags, catalog, referrers.
#include <nlohmann/json.hpp>

#include "berth/oci/error.hpp"
#include "berth/oci/media_types.hpp"
#include "berth/registry/registry.hpp"
#include "berth/storage/meta_store.hpp"
#include "validate.hpp"

namespace berth::registry {

using oci::Error;
using oci::ErrorCode;

namespace {

// One more than asked tells whether another page follows, without counting.
template <typename Fetch>
Page page_of(std::optional<std::size_t> n, std::size_t max_page, Fetch fetch) {
    const std::size_t limit = std::min(n.value_or(max_page), max_page);
    Page page;
    if (limit == 0) return page;
    page.items = fetch(limit + 1);
    if (page.items.size() > limit) {
        page.items.resize(limit);
        page.more = true;
    }
    return page;
}

}  // namespace

Page Registry::list_tags(const std::string& repo, std::optional<std::size_t> n, const std::string& last) {
    require_name(repo);
    if (upstreams_ && upstreams_->mirrors(repo)) {
        // What the upstream has, when it can say: a mirror lists the tags one could pull.
        const std::size_t limit = std::min(n.value_or(options_.max_page), options_.max_page);
        if (limit == 0) return {};
        if (auto upstream = upstreams_->list_tags(repo, limit, last)) {
            Page page{std::move(upstream->tags), upstream->more};
            if (page.items.size() > limit) {
                page.items.resize(limit);
                page.more = true;
            }
            // More after nothing, or after a page that did not pass `last`, would page forever.
            if (page.items.empty() || (!last.empty() && page.items.back() <= last)) page.more = false;
            return page;
        }
    }
    if (!meta_.has_repository(repo)) throw Error(ErrorCode::name_unknown, "repository name not known to registry");
    return page_of(n, options_.max_page, [&](std::size_t limit) { return meta_.tags(repo, last, limit); });
}

Page Registry::catalog(std::optional<std::size_t> n, const std::string& last) {
    return page_of(n, options_.max_page, [&](std::size_t limit) { return meta_.repositories(last, limit); });
}

std::string Registry::referrers(const std::string& repo, const std::string& digest_text,
                                const std::string& artifact_type) {
    require_name(repo);
    auto digest = oci::Digest::parse_or_throw(digest_text);
    std::string manifests;
    for (auto& descriptor : meta_.referrers(repo, digest.str())) {
        if (!artifact_type.empty()) {
            auto parsed = nlohmann::json::parse(descriptor);
            if (parsed.value("artifactType", "") != artifact_type) continue;
        }
        if (!manifests.empty()) manifests += ',';
        manifests += descriptor;
    }
    return R"({"schemaVersion":2,"mediaType":")" + std::string(oci::media_type::oci_index) + R"(","manifests":[)" +
           manifests + "]}";
}

}  // namespace berth::registry
