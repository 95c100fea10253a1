#pragma once
// What berth answers its clients as JSON, where another front end (the command line) shows the same.
#include <string>

#include "berth/registry/lineage.hpp"

namespace berth::http {

// GET /_berth/v1/lineage and `berth lineage --json`: {"base": {"repository", "reference", "digest",
// "versions"}, "derived": [{"repository", "tags", "digest", "base_digest", "current"}], "next"};
// next_url: the next page's URL, or "" for null.
std::string lineage_json(const registry::Lineage& lineage, const std::string& next_url);

}  // namespace berth::http
