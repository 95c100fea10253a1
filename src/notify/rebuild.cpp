// rebuild.hpp
#include "rebuild.hpp"

#include <algorithm>
#include <optional>

#include "berth/oci/names.hpp"
#include "berth/registry/lineage.hpp"
#include "berth/storage/meta_store.hpp"

namespace berth::notify {
namespace {

constexpr std::size_t images_per_notice = 100;
// A base with more derived images than this is told in part (the lineage API pages the rest).
constexpr std::size_t max_images = 10000;
constexpr std::size_t max_history = 1000;  // a tag's past versions looked at for the previous one

bool names_base(const std::vector<std::string>& globs, const std::string& repo, const std::string& tag) {
    return std::any_of(globs.begin(), globs.end(), [&](const std::string& glob) {
        const auto colon = glob.rfind(':');
        return oci::glob_match(glob.substr(0, colon), repo) && oci::glob_match(glob.substr(colon + 1), tag);
    });
}

// The digest the tag named just before it named `digest` at `clock`.
std::optional<std::string> previous_of(const storage::MetaStore& meta, const Notice& moved) {
    auto history = meta.tag_history(moved.repository, moved.tag);
    std::optional<std::string> previous;
    std::uint64_t previous_at = 0;
    const auto from = history.size() > max_history ? history.end() - max_history : history.begin();
    for (auto it = from; it != history.end(); ++it) {
        if (*it == moved.digest) continue;
        auto at = meta.tag_named_at(moved.repository, moved.tag, *it);
        if (at && *at < moved.stamp.clock && *at >= previous_at) {
            previous = *it;
            previous_at = *at;
        }
    }
    return previous;
}

// Built on `previous` and on no later version of the base (an image on the patched base also
// begins with the old base's layers when the patch only adds layers).
std::vector<Rebuilt> built_on(const storage::MetaStore& meta, const Notice& moved, const std::string& previous,
                              const std::function<bool(const std::string&)>& may_pull) {
    std::vector<Rebuilt> out;
    registry::LineageQuery ask{moved.repository, moved.tag, {}, images_per_notice, may_pull};
    for (std::size_t read = 0; read < max_images;) {
        registry::Lineage page;
        try {
            page = registry::lineage(meta, ask);
        } catch (const std::exception&) {
            break;  // the tag is gone from this replica's index: nothing to list
        }
        for (auto& derived : page.derived) {
            ++read;
            if (derived.base_digest != previous) continue;
            if (may_pull && !may_pull(derived.repository)) continue;
            if (derived.tags.empty()) out.push_back({derived.repository, "", derived.digest});
            for (auto& tag : derived.tags) out.push_back({derived.repository, tag, derived.digest});
        }
        if (!page.next) break;
        ask.after = *page.next;
    }
    return out;
}

std::vector<Notice> rebuilds_of(const storage::MetaStore& meta, const Notice& moved,
                                const std::function<bool(const std::string&)>& may_pull) {
    auto previous = previous_of(meta, moved);
    if (!previous) return {};
    auto images = built_on(meta, moved, *previous, may_pull);
    std::vector<Notice> out;
    for (std::size_t first = 0, page = 0; first < images.size() || out.empty(); first += images_per_notice, ++page) {
        Notice n = moved;
        n.action = Action::rebuild;
        n.previous = *previous;
        const auto end = std::min(images.size(), first + images_per_notice);
        n.images.assign(images.begin() + std::min(first, end), images.begin() + end);
        n.page = page;
        n.last_page = end == images.size();
        char suffix[16];
        std::snprintf(suffix, sizeof suffix, "-%04zu", page);
        n.sequence = sequence_text(moved.stamp, 5, moved.tag + suffix);
        n.id = id_of(moved.id + "\nrebuild\n" + std::to_string(page));
        out.push_back(std::move(n));
    }
    return out;
}

}  // namespace

void add_rebuilds(std::vector<Notice>& notices, const storage::MetaStore& meta,
                  const std::vector<std::string>& base_globs, const std::function<bool(const std::string&)>& may_pull) {
    if (base_globs.empty()) return;
    std::vector<Notice> out;
    for (auto& n : notices) {
        const bool moved = n.action == Action::tag && names_base(base_globs, n.repository, n.tag);
        out.push_back(std::move(n));
        if (!moved) continue;
        for (auto& rebuild : rebuilds_of(meta, out.back(), may_pull)) out.push_back(std::move(rebuild));
    }
    notices = std::move(out);
}

}  // namespace berth::notify
