#pragma once
// How carried images are named: an index.json entry's annotations or a docker archive's RepoTags
// give a full reference (REPOSITORY:TAG, HOST/REPOSITORY:TAG) or a bare tag.
#include <optional>
#include <string>

namespace berth::transfer {

struct ImageName {
    std::string repository;  // "" for a bare tag: the caller's --repository decides
    std::string tag;         // "" when named by digest only
};

// nullopt when text names nothing berth can store (an invalid name or tag). A registry host's
// port is dropped ("localhost:5000/app" -> "localhost/app"): berth's repository names hold no ':'.
std::optional<ImageName> parse_image_name(const std::string& text);

// prefix/repository ("" prefix: repository).
std::string with_prefix(const std::string& prefix, const std::string& repository);

}  // namespace berth::transfer
