#pragma once
// Rebuild alerts: a tag that a policy's base_images names moved, told as what was built on the
// version it moved from, read from the lineage index (registry/lineage.hpp). Each moved tag's list
// is read once and kept a while: endpoints retry, and every poller of the feed reads it again.
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "notice.hpp"

namespace berth::notify {

// Whether base_globs (REPOSITORY:TAG globs) name a tag.
bool names_base(const std::vector<std::string>& base_globs, const std::string& repo, const std::string& tag);

class RebuildLists {
public:
    explicit RebuildLists(const storage::MetaStore& meta) : meta_(meta) {}
    // The `rebuild` notices of a `tag` notice that moved a base from an earlier digest (none when
    // it did not): one per page of the images `visible` lets through (null: all), at least one, with
    // ids and sequences of their own that follow the tag's.
    std::vector<Notice> of(const Notice& moved, const std::function<bool(const std::string&)>& visible);

private:
    struct List {
        std::optional<std::string> previous;
        std::vector<Rebuilt> images;
    };
    std::shared_ptr<const List> list_of(const Notice& moved);

    const storage::MetaStore& meta_;
    std::mutex mutex_;
    std::map<std::string, std::shared_ptr<const List>> kept_;  // by the tag notice's id
    std::deque<std::string> order_;                            // least recently read first
    std::size_t images_kept_ = 0;
};

}  // namespace berth::notify
