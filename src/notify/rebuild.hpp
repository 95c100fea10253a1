#pragma once
// Rebuild alerts: a tag that a policy's base_images names moved, told as what was built on the
// version it moved from, read from the lineage index (registry/lineage.hpp) a page at a time.
#include <functional>
#include <string>
#include <vector>

#include "notice.hpp"

namespace berth::notify {

// After each `tag` notice in notices that base_globs (REPOSITORY:TAG) name and that moved the tag
// from an earlier digest, its `rebuild` notices (one per page of images, at least one), with ids
// and sequences of their own that follow the tag's. may_pull: which images may be listed (null:
// all).
void add_rebuilds(std::vector<Notice>& notices, const storage::MetaStore& meta,
                  const std::vector<std::string>& base_globs, const std::function<bool(const std::string&)>& may_pull);

}  // namespace berth::notify
