// The web UI's views (browse.hpp): repositories with their totals, a repository's tags, a manifest
// in full, the mirrors. Every string comes out through nlohmann's encoder, invalid UTF-8 replaced:
// manifests, configs and annotations are the pushers' words, and the browser shows them as text.
#include "berth/registry/browse.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "berth/oci/error.hpp"
#include "berth/oci/json.hpp"
#include "berth/oci/manifest.hpp"
#include "berth/oci/media_types.hpp"
#include "berth/oci/names.hpp"
#include "berth/registry/registry.hpp"
#include "berth/storage/pull_times.hpp"

namespace berth::registry {

using nlohmann::json;
using oci::Error;
using oci::ErrorCode;

namespace {

constexpr std::size_t max_children = 64, max_strings = 500;

json time_or_null(std::optional<std::uint64_t> ms) { return ms && *ms ? json(*ms) : json(nullptr); }

std::string dump(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

// A pusher's value as text: strings as they are, anything else as its JSON.
std::string text_of(const json& value) { return value.is_string() ? value.get<std::string>() : dump(value); }

// The same, or null where the pusher wrote nothing.
json text_or_null(const json& value) { return value.is_null() ? json(nullptr) : json(text_of(value)); }

json strings_of(const json& value) {
    if (!value.is_array()) return nullptr;
    auto out = json::array();
    for (auto& item : value) {
        if (out.size() == max_strings) break;
        out.push_back(text_of(item));
    }
    return out;
}

json map_of(const json& value) {
    auto out = json::object();
    if (!value.is_object()) return out;
    for (auto& [key, item] : value.items()) {
        if (out.size() == max_strings) break;
        out[key] = text_of(item);
    }
    return out;
}

json member(const json& object, const char* key) {
    if (!object.is_object()) return nullptr;
    auto it = object.find(key);
    return it == object.end() ? json(nullptr) : *it;
}

std::string platform_text(const json& platform) {
    if (!platform.is_object()) return {};
    auto text = text_of(member(platform, "os")) + "/" + text_of(member(platform, "architecture"));
    if (auto variant = member(platform, "variant"); variant.is_string()) text += "/" + variant.get<std::string>();
    return text;
}

}  // namespace

struct Browse::View {
    const Registry& registry;

    const storage::MetaStore& meta() const { return registry.meta_; }

    std::optional<std::uint64_t> last_pull(const std::string& repo, const std::string& name) const {
        return registry.pulls_ ? registry.pulls_->last(repo, name) : std::nullopt;
    }

    json summary(const std::string& repo) const {
        const auto held = meta().repository_usage(repo);
        return {{"name", repo},
                {"tags", held.tags},
                {"manifests", held.manifests},
                {"bytes", held.bytes},
                {"last_push", time_or_null(storage::HybridClock::physical_ms(held.last_push))},
                {"last_pull", time_or_null(last_pull(repo, storage::PullTimes::whole_repository))}};
    }

    std::optional<storage::ManifestRecord> live_manifest(const std::string& repo, const std::string& digest) const {
        auto record = meta().manifest(repo, digest);
        if (!record || record->deleted) return std::nullopt;
        return record;
    }

    // An image: its manifest, config and layers; an index: itself and its children stored here.
    std::uint64_t size_of(const std::string& repo, const storage::ManifestRecord& record, int depth = 0) const {
        try {
            return size_of(repo, oci::parse_manifest(record.bytes, record.media_type), record.bytes.size(), depth);
        } catch (const std::exception&) {
            // Stored bytes parsed when they were pushed; a newer berth's rule may refuse them now.
            return record.bytes.size();
        }
    }

    std::uint64_t size_of(const std::string& repo, const oci::ParsedManifest& parsed, std::size_t bytes,
                          int depth = 0) const {
        std::uint64_t size = bytes;
        if (parsed.config) size += static_cast<std::uint64_t>(parsed.config->size);
        for (auto& layer : parsed.layers) size += static_cast<std::uint64_t>(layer.size);
        std::size_t children = 0;
        for (auto& child : parsed.manifests) {
            if (depth > 0 || ++children > max_children) break;
            if (auto stored = live_manifest(repo, child.digest.str())) size += size_of(repo, *stored, depth + 1);
            else size += static_cast<std::uint64_t>(child.size);
        }
        return size;
    }

    std::optional<std::string> config_text(const oci::Descriptor& config) const {
        if (!oci::media_type::image_config(config.media_type) || config.size <= 0 ||
            static_cast<std::size_t>(config.size) > Browse::max_config_bytes)
            return std::nullopt;
        return registry.blobs_.read(config.digest, Browse::max_config_bytes);
    }

    // "verified", "invalid" (why in detail) or "unsigned" where a policy asks for signatures; else
    // "signed" when a signature is attached (not checked: no key says whose it should be).
    std::pair<json, json> signature(const std::string& repo, const oci::Digest& digest) const {
        const auto* policy = policy_for(registry.options_.policies, repo);
        if (policy && policy->require_signature && registry.signatures_) {
            auto reason = registry.signatures_->unsigned_reason(*policy, repo, digest);
            if (reason.empty()) return {"verified", nullptr};
            if (reason == "unsigned") return {"unsigned", nullptr};
            return {"invalid", reason};
        }
        if (auto tag = meta().tag(repo, signature_tag(digest)); tag && !tag->deleted()) return {"signed", nullptr};
        for (auto& descriptor : meta().referrers(repo, digest.str())) {
            auto type = text_of(member(oci::parse_json(descriptor), "artifactType"));
            if (type.find("signature") != std::string::npos ||
                type.starts_with("application/vnd.dev.sigstore.bundle") ||
                type == "application/vnd.dev.cosign.artifact.sig.v1+json")
                return {"signed", nullptr};
        }
        return {"unsigned", nullptr};
    }

    bool attachment(const oci::Digest& digest, const storage::ManifestRecord& record) const {
        try {
            return registry.attachment(digest, oci::parse_manifest(record.bytes, record.media_type));
        } catch (const std::exception&) {
            return false;
        }
    }

    bool immutable(const std::string& repo) const {
        const auto* policy = policy_for(registry.options_.policies, repo);
        return policy && policy->immutable_tags;
    }

    // A config descriptor, and what an image's config blob says (when stored here and not too big).
    json config(const oci::Descriptor& descriptor) const {
        json config = {
            {"digest", descriptor.digest.str()}, {"mediaType", descriptor.media_type}, {"size", descriptor.size}};
        auto text = config_text(descriptor);
        if (!text) return config;
        auto c = oci::parse_json(*text);
        auto inner = member(c, "config");
        for (auto key : {"created", "author", "os", "architecture", "variant"})
            config[key] = text_or_null(member(c, key));
        config["entrypoint"] = strings_of(member(inner, "Entrypoint"));
        config["cmd"] = strings_of(member(inner, "Cmd"));
        config["env"] = strings_of(member(inner, "Env"));
        config["working_dir"] = text_or_null(member(inner, "WorkingDir"));
        config["user"] = text_or_null(member(inner, "User"));
        config["labels"] = map_of(member(inner, "Labels"));
        auto ports = json::array();
        const auto exposed = map_of(member(inner, "ExposedPorts"));
        for (auto& [port, ignored] : exposed.items()) ports.push_back(port);
        config["exposed_ports"] = ports;
        auto history = json::array();
        auto entries = member(c, "history");
        if (!entries.is_array()) entries = json::array();
        for (auto& step : entries) {
            if (history.size() == Browse::max_history) break;
            history.push_back({{"created", text_or_null(member(step, "created"))},
                               {"created_by", text_or_null(member(step, "created_by"))},
                               {"comment", text_or_null(member(step, "comment"))},
                               {"empty_layer", member(step, "empty_layer") == true}});
        }
        config["history"] = history;
        config["history_total"] = entries.size();
        return config;
    }

    // The longest proper layer prefix that is another image's whole layer list, preferring one the
    // caller may pull and that a tag names.
    json base(const std::string& repo, const oci::Digest& digest, const std::vector<std::string>& layers,
              const MayPull& may_pull) const {
        constexpr std::size_t max_length = 128;  // bases deeper than this are not looked for
        std::optional<json> found;
        std::size_t found_length = 0;
        for (auto& [length, ref] : meta().bases_of(layers, max_length, 16)) {
            if (found && length < found_length) break;
            if ((ref.repo == repo && ref.digest == digest.str()) || (may_pull && !may_pull(ref.repo))) continue;
            auto tags = meta().tags_of(ref.repo, ref.digest);
            json candidate = {{"repository", ref.repo}, {"digest", ref.digest}, {"tags", tags}, {"layers", length}};
            if (!tags.empty()) return candidate;
            if (!found) found = candidate, found_length = length;
        }
        return found ? *found : json(nullptr);
    }
};

namespace {

std::string resolve_digest(const storage::MetaStore& meta, const std::string& repo, const std::string& reference) {
    if (oci::Digest::parse(reference)) return reference;
    if (!oci::valid_tag(reference)) throw Error(ErrorCode::manifest_invalid, "not a tag or a digest", reference);
    auto tag = meta.tag(repo, reference);
    if (!tag || tag->deleted()) throw Error(ErrorCode::manifest_unknown, "manifest unknown", reference);
    return tag->digest;
}

}  // namespace

void Browse::require_repository(const Registry& registry, const std::string& repo) {
    if (!oci::valid_repository_name(repo)) throw Error(ErrorCode::name_invalid, "invalid repository name", repo);
    if (!registry.meta_.has_repository(repo)) throw Error(ErrorCode::name_unknown, "repository unknown", repo);
}

std::string Browse::repositories(const Registry& registry, const RepositoryListQuery& query, const MayPull& may_pull) {
    View view{registry};
    const auto limit = std::clamp<std::size_t>(query.limit, 1, 200);
    constexpr std::size_t chunk = 1000;
    auto list = json::array();
    std::string after = query.after;
    bool after_visible = true;
    std::size_t read = 0;
    for (bool exhausted = false; !exhausted && list.size() < limit && read < max_names_read;) {
        auto names = registry.meta_.repositories(after, chunk);
        exhausted = names.size() < chunk;
        for (auto& name : names) {
            ++read;
            after = name;
            after_visible = !may_pull || may_pull(name);
            if (name.find(query.search) != std::string::npos && after_visible) list.push_back(view.summary(name));
            if (list.size() == limit || read == max_names_read) break;
        }
    }
    const bool more = !registry.meta_.repositories(after, 1).empty();
    if (more && !after_visible && query.hidden_cursor) after = query.hidden_cursor(after);
    return dump({{"repositories", list}, {"next", more ? json(after) : json(nullptr)}});
}

std::string Browse::repository(Registry& registry, const TagListQuery& query) {
    View view{registry};
    const auto& repo = query.repository;
    require_repository(registry, repo);
    const auto limit = std::clamp<std::size_t>(query.limit, 1, 1000);
    auto names = registry.meta_.tags(repo, query.after, limit + 1);
    const bool more = names.size() > limit;
    if (more) names.resize(limit);
    auto tags = json::array();
    for (auto& tag : names) {
        auto record = registry.meta_.tag(repo, tag);
        if (!record || record->deleted()) continue;
        json entry = {{"tag", tag},
                      {"digest", record->digest},
                      {"pushed", time_or_null(storage::HybridClock::physical_ms(record->stamp.clock))},
                      {"immutable", view.immutable(repo)},
                      {"mediaType", nullptr},
                      {"size", nullptr},
                      {"platforms", nullptr},
                      {"signature", nullptr},
                      {"signature_detail", nullptr}};
        auto pulled = std::max(view.last_pull(repo, tag).value_or(0), view.last_pull(repo, record->digest).value_or(0));
        entry["last_pull"] = time_or_null(pulled);
        if (auto manifest = view.live_manifest(repo, record->digest)) {
            entry["mediaType"] = manifest->media_type;
            entry["size"] = view.size_of(repo, *manifest);
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
            if (auto digest = oci::Digest::parse(record->digest); digest && !view.attachment(*digest, *manifest)) {
                auto [state, detail] = view.signature(repo, *digest);
                entry["signature"] = state;
                entry["signature_detail"] = detail;
            }
        }
        tags.push_back(std::move(entry));
    }
    auto out = view.summary(repo);
    out["tags_total"] = out["tags"];
    out["mirrored"] = registry.upstreams_ && registry.upstreams_->mirrors(repo);
    out["tags"] = tags;
    out["next"] = more ? json(names.back()) : json(nullptr);
    return dump(out);
}

std::string Browse::manifest(Registry& registry, const std::string& repo, const std::string& reference,
                             const MayPull& may_pull) {
    View view{registry};
    require_repository(registry, repo);
    const auto digest_text = resolve_digest(registry.meta_, repo, reference);
    auto record = view.live_manifest(repo, digest_text);
    if (!record) throw Error(ErrorCode::manifest_unknown, "manifest unknown", reference);
    const auto digest = oci::Digest::parse_or_throw(digest_text);
    const auto parsed = oci::parse_manifest(record->bytes, record->media_type);
    const auto doc = oci::parse_json(record->bytes);

    const bool image_config = parsed.config && oci::media_type::image_config(parsed.config->media_type);
    json out = {{"repository", repo},
                {"reference", reference},
                {"digest", digest_text},
                {"mediaType", record->media_type},
                // An artifact without artifactType is known by its config's media type, as the referrers API says.
                {"artifact_type", parsed.kind == oci::ManifestKind::index || image_config
                                      ? text_or_null(member(doc, "artifactType"))
                                      : json(parsed.artifact_type)},
                {"size", view.size_of(repo, parsed, record->bytes.size())},
                {"kind", parsed.kind == oci::ManifestKind::index ? "index"
                         : image_config                          ? "image"
                                                                 : "artifact"},
                {"tags", registry.meta_.tags_of(repo, digest_text)},
                {"annotations", map_of(member(doc, "annotations"))}};

    auto platforms = json::array();
    for (auto& child : member(doc, "manifests")) {
        if (platforms.size() == max_children) break;
        platforms.push_back({{"digest", text_of(member(child, "digest"))},
                             {"mediaType", text_of(member(child, "mediaType"))},
                             {"size", member(child, "size")},
                             {"platform", platform_text(member(child, "platform"))},
                             {"annotations", map_of(member(child, "annotations"))}});
    }
    out["platforms"] = platforms;
    out["platforms_total"] = parsed.manifests.size();

    auto layers = json::array();
    std::uint64_t layer_bytes = 0;
    for (auto& layer : parsed.layers) {
        layer_bytes += static_cast<std::uint64_t>(layer.size);
        if (layers.size() < max_layers)
            layers.push_back({{"digest", layer.digest.str()}, {"mediaType", layer.media_type}, {"size", layer.size}});
    }
    out["layers"] = layers;
    out["layers_total"] = parsed.layers.size();
    out["layers_bytes"] = layer_bytes;

    out["config"] = parsed.config ? view.config(*parsed.config) : json(nullptr);

    auto referrers = json::array();
    auto listed = registry.meta_.referrers(repo, digest_text);
    for (auto& descriptor : listed) {
        if (referrers.size() == max_referrers) break;
        auto d = oci::parse_json(descriptor);
        referrers.push_back({{"digest", text_of(member(d, "digest"))},
                             {"mediaType", text_of(member(d, "mediaType"))},
                             {"artifact_type", text_or_null(member(d, "artifactType"))},
                             {"size", member(d, "size")},
                             {"annotations", map_of(member(d, "annotations"))}});
    }
    out["referrers"] = referrers;
    out["referrers_total"] = listed.size();
    out["subject"] = parsed.subject ? json{{"digest", parsed.subject->digest.str()},
                                           {"mediaType", parsed.subject->media_type},
                                           {"size", parsed.subject->size}}
                                    : json(nullptr);
    out["base"] = parsed.kind == oci::ManifestKind::image && parsed.layers.size() > 1
                      ? view.base(repo, digest, parsed.layer_digests(), may_pull)
                      : json(nullptr);
    auto [state, detail] = view.signature(repo, digest);
    out["signature"] = registry.attachment(digest, parsed) ? json(nullptr) : state;
    out["signature_detail"] = detail;
    out["immutable_tags"] = view.immutable(repo) ? out["tags"] : json::array();
    out["raw_truncated"] = record->bytes.size() > max_raw_bytes;
    out["raw"] = record->bytes.substr(0, max_raw_bytes);
    return dump(out);
}

std::string Browse::mirrors(const Registry& registry, const MayPull& may_pull) {
    constexpr std::size_t max_listed = 100;
    auto list = json::array();
    for (auto& mirror : registry.upstreams_ ? registry.upstreams_->mirror_status() : std::vector<MirrorStatus>{}) {
        auto repositories = json::array();
        bool more = false;
        if (!mirror.host.empty()) {
            const auto prefix = mirror.host + "/";
            std::string after = prefix;
            std::size_t read = 0;
            for (bool done = false; !done && read < Browse::max_names_read;) {
                auto names = registry.meta_.repositories(after, 500);
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

}  // namespace berth::registry
