#include "berth/oci/paths.hpp"

#include "berth/oci/digest.hpp"
#include "berth/oci/error.hpp"
#include "berth/oci/names.hpp"

namespace berth::oci::path {
namespace {

// Every part is checked against its grammar: a path built here can never name another route,
// whatever a caller decoded from a request.
std::string_view checked_name(std::string_view name) {
    if (!valid_repository_name(name)) throw Error(ErrorCode::name_invalid, "invalid repository name");
    return name;
}

std::string_view checked_digest(std::string_view digest) {
    if (!Digest::parse(digest)) throw Error(ErrorCode::digest_invalid, "invalid digest");
    return digest;
}

std::string_view checked_reference(std::string_view reference) {
    if (!valid_tag(reference) && !Digest::parse(reference))
        throw Error(ErrorCode::manifest_unknown, "neither a tag nor a digest");
    return reference;
}

std::string join(std::string_view name, std::string_view middle, std::string_view last = {}) {
    std::string out;
    out.reserve(4 + name.size() + middle.size() + last.size());
    out.append("/v2/").append(checked_name(name)).append(middle).append(last);
    return out;
}

}  // namespace

std::string blob(std::string_view name, std::string_view digest) {
    return join(name, "/blobs/", checked_digest(digest));
}
std::string uploads(std::string_view name) { return join(name, "/blobs/uploads/"); }
std::string upload(std::string_view name, std::string_view id) {
    if (!valid_upload_id(id)) throw Error(ErrorCode::blob_upload_unknown, "invalid upload id");
    return join(name, "/blobs/uploads/", id);
}
std::string manifest(std::string_view name, std::string_view reference) {
    return join(name, "/manifests/", checked_reference(reference));
}
std::string tags(std::string_view name) { return join(name, "/tags/list"); }
std::string referrers(std::string_view name, std::string_view digest) {
    return join(name, "/referrers/", checked_digest(digest));
}
std::string catalog() { return "/v2/_catalog"; }

}  // namespace berth::oci::path
