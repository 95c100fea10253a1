#include "berth/oci/paths.hpp"

namespace berth::oci::path {
namespace {

std::string join(std::string_view name, std::string_view middle, std::string_view last = {}) {
    std::string out;
    out.reserve(4 + name.size() + middle.size() + last.size());
    out.append("/v2/").append(name).append(middle).append(last);
    return out;
}

}  // namespace

std::string blob(std::string_view name, std::string_view digest) { return join(name, "/blobs/", digest); }
std::string upload(std::string_view name, std::string_view id) { return join(name, "/blobs/uploads/", id); }
std::string manifest(std::string_view name, std::string_view reference) { return join(name, "/manifests/", reference); }
std::string tags(std::string_view name) { return join(name, "/tags/list"); }
std::string referrers(std::string_view name, std::string_view digest) { return join(name, "/referrers/", digest); }
std::string catalog() { return "/v2/_catalog"; }

}  // namespace berth::oci::path
