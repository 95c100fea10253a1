// rebuild.hpp
#include "rebuild.hpp"

#include <algorithm>
#include <set>

#include "berth/oci/names.hpp"
#include "berth/registry/lineage.hpp"
#include "berth/storage/meta_store.hpp"

namespace berth::notify {
namespace {

constexpr std::size_t images_per_notice = 100;
// Derived manifests read per moved tag (of the old version, and of the new to leave out): a base
// with more is told in part, and the lineage API pages the rest.
constexpr std::size_t max_images = 10000;
constexpr std::size_t max_history = 1000;  // a tag's past versions looked at for the previous one
// Lists kept, least recently read dropped first: more than one push's moved tags (at most 65), so
// a page of them read again is read from here; and at most so many images in all (30 MiB with
// names of ordinary length, ~100 MiB were every name 255 bytes).
constexpr std::size_t lists_kept = 128, images_kept = 200000;

// The digest the tag named just before it named moved.digest at the move's clock.
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

// What is built on one version of the base, every repository, at most max_images.
std::vector<registry::Derived> built_on(const storage::MetaStore& meta, const std::string& repo,
                                        const std::string& digest) {
    std::vector<registry::Derived> out;
    registry::LineageQuery ask{repo, digest, {}, images_per_notice, nullptr};
    while (out.size() < max_images) {
        registry::Lineage page;
        try {
            page = registry::lineage(meta, ask);
        } catch (const std::exception&) {
            break;  // that version is gone from this replica's index: nothing to list
        }
        for (auto& derived : page.derived) out.push_back(std::move(derived));
        if (!page.next || page.derived.empty()) break;
        ask.after = *page.next;
    }
    return out;
}

}  // namespace

bool names_base(const std::vector<std::string>& globs, const std::string& repo, const std::string& tag) {
    return std::any_of(globs.begin(), globs.end(), [&](const std::string& glob) {
        const auto colon = glob.rfind(':');
        return oci::glob_match(glob.substr(0, colon), repo) && oci::glob_match(glob.substr(colon + 1), tag);
    });
}

// Built on the previous version and not on the new one (an image on a patched base also begins
// with the old base's layers when the patch only adds layers).
std::shared_ptr<const RebuildLists::List> RebuildLists::list_of(const Notice& moved) {
    {
        std::lock_guard lock(mutex_);
        if (auto it = kept_.find(moved.id); it != kept_.end()) {
            order_.erase(std::find(order_.begin(), order_.end(), moved.id));
            order_.push_back(moved.id);
            return it->second;
        }
    }
    auto made = std::make_shared<List>();
    auto& list = *made;
    list.previous = previous_of(meta_, moved);
    if (list.previous) {
        std::set<std::string> on_new;
        for (auto& derived : built_on(meta_, moved.repository, moved.digest)) on_new.insert(derived.digest);
        for (auto& derived : built_on(meta_, moved.repository, *list.previous)) {
            if (derived.digest == moved.digest || on_new.count(derived.digest)) continue;
            if (derived.tags.empty()) list.images.push_back({derived.repository, "", derived.digest});
            for (auto& tag : derived.tags) list.images.push_back({derived.repository, tag, derived.digest});
        }
    }
    std::lock_guard lock(mutex_);
    if (kept_.emplace(moved.id, made).second) {
        order_.push_back(moved.id);
        images_kept_ += made->images.size();
    }
    while (order_.size() > lists_kept || (images_kept_ > images_kept && order_.size() > 1)) {
        auto oldest = kept_.find(order_.front());
        images_kept_ -= oldest->second->images.size();
        kept_.erase(oldest);
        order_.pop_front();
    }
    return made;
}

std::vector<Notice> RebuildLists::of(const Notice& moved, const std::function<bool(const std::string&)>& visible) {
    const auto kept = list_of(moved);
    const auto& list = *kept;
    if (!list.previous) return {};
    std::vector<Rebuilt> images;
    for (auto& image : list.images)
        if (!visible || visible(image.repository)) images.push_back(image);
    std::vector<Notice> out;
    for (std::size_t first = 0, page = 0; first < images.size() || out.empty(); first += images_per_notice, ++page) {
        Notice n = moved;
        n.action = Action::rebuild;
        n.previous = *list.previous;
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

}  // namespace berth::notify
