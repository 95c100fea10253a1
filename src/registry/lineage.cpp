// "What is built on this base?" (registry/lineage.hpp): a merge of one sorted prefix scan of
// the lineage index per layer list of the base's versions.
#include "berth/registry/lineage.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "berth/oci/error.hpp"
#include "berth/oci/manifest.hpp"
#include "berth/oci/names.hpp"

namespace berth::registry {

using storage::MetaStore;
using Ref = MetaStore::ManifestRef;

namespace {

struct BaseChain {
    std::string version;              // the base's digest this layer list belongs to
    std::vector<std::string> layers;  // an image's own, or one child's of an index
};

// The layer lists of one version of the base, and the digests that are the base itself.
void add_version(const MetaStore& meta, const std::string& repo, const std::string& version,
                 std::vector<BaseChain>& chains, std::set<std::string>& own) {
    own.insert(version);
    auto record = meta.manifest(repo, version);
    if (!record || record->deleted) return;
    try {
        auto parsed = oci::parse_manifest(record->bytes, record->media_type);
        if (parsed.kind == oci::ManifestKind::image && !parsed.layers.empty())
            chains.push_back({version, parsed.layer_digests()});
        for (auto& child : parsed.manifests) {
            own.insert(child.digest.str());
            auto child_record = meta.manifest(repo, child.digest.str());
            if (!child_record || child_record->deleted) continue;
            auto child_parsed = oci::parse_manifest(child_record->bytes, child_record->media_type);
            if (child_parsed.kind == oci::ManifestKind::image && !child_parsed.layers.empty())
                chains.push_back({version, child_parsed.layer_digests()});
        }
    } catch (const oci::Error&) {
        // Stored manifests parsed when they were stored; one that no longer does has no layers to follow.
    }
}

}  // namespace

Lineage lineage(const MetaStore& meta, const LineageQuery& query) {
    Lineage out{query.repository, query.reference, {}, {}, {}, {}};
    const bool by_digest = query.reference.find(':') != std::string::npos;
    if (by_digest) {
        out.digest = query.reference;
        out.versions = {query.reference};
    } else {
        out.versions = meta.tag_history(query.repository, query.reference);
        if (auto tag = meta.tag(query.repository, query.reference); tag && !tag->deleted()) out.digest = tag->digest;
    }
    if (out.versions.empty() || (by_digest && !meta.manifest(query.repository, query.reference)))
        throw oci::Error(oci::ErrorCode::manifest_unknown, "the base never named a manifest here", query.reference);

    std::vector<BaseChain> chains;
    std::set<std::string> own;
    for (auto& version : out.versions) add_version(meta, query.repository, version, chains, own);

    // One sorted scan per layer list; a manifest found by several is reported with the longest
    // list it begins with (a newer base that extends an older one is the closer base).
    const std::size_t limit = std::max<std::size_t>(1, query.limit);
    Ref cursor = query.after;
    constexpr int max_rounds = 64;  // a page mostly filtered out stops here and says where to go on
    for (int round = 0; round < max_rounds && out.derived.size() < limit; ++round) {
        std::map<Ref, const BaseChain*> found;
        std::optional<Ref> horizon;  // beyond the end of a scan that may go on: not merged yet
        for (auto& chain : chains) {
            auto page = meta.built_on(chain.layers, cursor, limit);
            if (page.size() == limit && (!horizon || page.back() < *horizon)) horizon = page.back();
            for (auto& ref : page) {
                auto& best = found[ref];
                if (!best || best->layers.size() < chain.layers.size()) best = &chain;
            }
        }
        if (found.empty()) return out;
        for (auto& [ref, chain] : found) {
            if (horizon && *horizon < ref) break;
            cursor = ref;
            if (ref.repo == query.repository && own.count(ref.digest)) continue;
            if (query.may_pull && !query.may_pull(ref.repo)) continue;
            Derived derived{ref.repo, ref.digest, {}, chain->version, chain->version == out.digest};
            for (auto& tag : meta.tags_ever(ref.repo, ref.digest))
                if (auto now = meta.tag(ref.repo, tag); now && now->digest == ref.digest) derived.tags.push_back(tag);
            out.derived.push_back(std::move(derived));
            if (out.derived.size() == limit) break;
        }
        // Every scan ended within this round: nothing after the cursor.
        if (!horizon && cursor == found.rbegin()->first) return out;
    }
    out.next = cursor;
    return out;
}

std::string lineage_cursor(const Ref& ref) { return ref.repo + "@" + ref.digest; }

std::optional<Ref> parse_lineage_cursor(const std::string& text) {
    const auto at = text.find('@');
    if (at == std::string::npos) return std::nullopt;
    Ref ref{text.substr(0, at), text.substr(at + 1)};
    if (!oci::valid_repository_name(ref.repo) || !oci::Digest::parse(ref.digest)) return std::nullopt;
    return ref;
}

}  // namespace berth::registry
