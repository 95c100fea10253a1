// The web UI's lists (views.hpp): who is signed in, repositories with their totals, a repository's
// tags, the mirrors, what retention would delete.
#include <algorithm>

#include "berth/oci/json.hpp"
#include "berth/registry/retention.hpp"
#include "berth/ui/views.hpp"
#include "pusher_text.hpp"

namespace berth::ui {
namespace {

json summary(const registry::RepositoryRead& facts) {
    return {{"name", facts.name},
            {"tags", facts.tags},
            {"manifests", facts.manifests},
            {"bytes", facts.bytes},
            {"last_push", time_or_null(facts.last_push_ms)},
            {"last_pull", time_or_null(facts.last_pull_ms)}};
}

json tag_entry(const registry::Contents& contents, const std::string& repo, const registry::TagRead& tag) {
    json entry = {{"tag", tag.tag},
                  {"digest", tag.digest},
                  {"pushed", time_or_null(tag.pushed_ms)},
                  {"last_pull", time_or_null(tag.last_pull_ms)},
                  {"immutable", contents.immutable_tags(repo)},
                  {"mediaType", nullptr},
                  {"size", nullptr},
                  {"platforms", nullptr},
                  {"signature", nullptr},
                  {"signature_detail", nullptr}};
    auto manifest = contents.manifest(repo, tag.digest);
    if (!manifest) return entry;
    entry["mediaType"] = manifest->media_type;
    entry["size"] = size_of(contents, repo, *manifest);
    auto doc = oci::parse_json(manifest->bytes);
    if (auto children = member(doc, "manifests"); children.is_array()) {
        auto platforms = json::array();
        for (auto& child : children) {
            auto text = platform_text(member(child, "platform"));
            if (!text.empty() && text != "unknown/unknown" && platforms.size() < max_children)
                platforms.push_back(text);
        }
        entry["platforms"] = platforms;
    }
    auto digest = oci::Digest::parse(tag.digest);
    if (!digest) return entry;
    try {
        if (contents.attachment(*digest, oci::parse_manifest(manifest->bytes, manifest->media_type))) return entry;
    } catch (const std::exception&) {
        // judged as an image: a manifest that no longer parses is no attachment
    }
    auto signature = contents.signature(repo, *digest);
    entry["signature"] = signature.state;
    entry["signature_detail"] = signature.detail.empty() ? json(nullptr) : json(signature.detail);
    return entry;
}

}  // namespace

std::string whoami_json(const std::optional<std::string>& user, bool auth, const std::string& registry_host) {
    return json{{"user", user ? json(*user) : json(nullptr)},
                {"auth", auth},
                {"registry", registry_host.empty() ? json(nullptr) : json(registry_host)}}
        .dump();
}

std::string repositories_json(const registry::Contents& contents, const RepositoryListQuery& query,
                              const MayPull& may_pull) {
    const auto limit = std::clamp<std::size_t>(query.limit, 1, 200);
    constexpr std::size_t chunk = 1000;
    auto list = json::array();
    std::string after = query.after;
    bool after_visible = true;
    std::size_t read = 0;
    for (bool exhausted = false; !exhausted && list.size() < limit && read < max_names_read;) {
        auto names = contents.repository_names(after, chunk);
        exhausted = names.size() < chunk;
        for (auto& name : names) {
            ++read;
            after = name;
            after_visible = !may_pull || may_pull(name);
            if (name.find(query.search) != std::string::npos && after_visible)
                list.push_back(summary(contents.repository(name)));
            if (list.size() == limit || read == max_names_read) break;
        }
    }
    const bool more = !contents.repository_names(after, 1).empty();
    if (more && !after_visible && query.hidden_cursor) after = query.hidden_cursor(after);
    return dump({{"repositories", list}, {"next", more ? json(after) : json(nullptr)}});
}

std::string repository_json(const registry::Contents& contents, const TagListQuery& query) {
    const auto& repo = query.repository;
    contents.require_repository(repo);
    const auto limit = std::clamp<std::size_t>(query.limit, 1, 1000);
    auto names = contents.tag_names(repo, query.after, limit + 1);
    const bool more = names.size() > limit;
    if (more) names.resize(limit);
    auto tags = json::array();
    for (auto& name : names)
        if (auto tag = contents.tag(repo, name)) tags.push_back(tag_entry(contents, repo, *tag));
    auto out = summary(contents.repository(repo));
    out["tags_total"] = out["tags"];
    out["mirrored"] = contents.mirrored(repo);
    out["tags"] = tags;
    out["next"] = more ? json(names.back()) : json(nullptr);
    return dump(out);
}

std::string mirrors_json(const registry::Contents& contents, const MayPull& may_pull) {
    constexpr std::size_t max_listed = 100;
    auto list = json::array();
    for (auto& mirror : contents.mirrors()) {
        auto repositories = json::array();
        bool more = false;
        if (!mirror.host.empty()) {
            const auto prefix = mirror.host + "/";
            std::string after = prefix;
            std::size_t read = 0;
            for (bool done = false; !done && read < max_names_read;) {
                auto names = contents.repository_names(after, 500);
                done = names.size() < 500;
                for (auto& name : names) {
                    ++read;
                    after = name;
                    if (!name.starts_with(prefix)) {
                        done = true;
                        break;
                    }
                    if (may_pull && !may_pull(name)) continue;
                    if (repositories.size() == max_listed) {
                        more = done = true;
                        break;
                    }
                    repositories.push_back(name);
                }
            }
        }
        list.push_back({{"host", mirror.host},
                        {"urls", mirror.urls},
                        {"hits", mirror.hits},
                        {"misses", mirror.misses},
                        {"stale", mirror.stale},
                        {"fetched_bytes", mirror.fetched_bytes},
                        {"errors", mirror.errors},
                        {"reachable", mirror.reachable ? json(*mirror.reachable) : json(nullptr)},
                        {"last_error", mirror.last_error.empty() ? json(nullptr) : json(mirror.last_error)},
                        {"repositories", repositories},
                        {"repositories_more", more}});
    }
    return dump({{"mirrors", list}});
}

std::string retention_json(registry::Retention* retention, const std::string& repo) {
    auto deletions = json::array();
    std::optional<std::string> policy;
    if (retention)
        policy = retention->preview(repo, [&](const registry::RetentionDeletion& deletion) {
            deletions.push_back(
                {{"kind", deletion.kind}, {"reference", deletion.reference}, {"reason", deletion.reason}});
        });
    return dump({{"repository", repo}, {"policy", policy ? json(*policy) : json(nullptr)}, {"deletions", deletions}});
}

}  // namespace berth::ui
