#include "validate.hpp"

#include "berth/oci/error.hpp"
#include "berth/oci/names.hpp"

namespace berth::registry {

using oci::Error;
using oci::ErrorCode;

void require_name(const std::string& repo) {
    if (!oci::valid_repository_name(repo))
        throw Error(ErrorCode::name_invalid, "invalid repository name", repo.substr(0, 300));
}

void require_tag(const std::string& tag) {
    if (!oci::valid_tag(tag)) throw Error(ErrorCode::tag_invalid, "invalid tag", tag.substr(0, 200));
}

Reference parse_reference(const std::string& reference, Access access) {
    if (reference.find(':') != std::string::npos) return oci::Digest::parse_or_throw(reference);
    if (access == Access::read && !oci::valid_tag(reference))
        throw Error(ErrorCode::manifest_unknown, "manifest unknown", reference.substr(0, 200));
    require_tag(reference);
    return reference;
}

void require_writable(const Options& options) {
    if (options.pull_only)
        throw oci::Error(oci::ErrorCode::unsupported, "this node agent serves pulls only: push to the registry");
}

}  // namespace berth::registry
