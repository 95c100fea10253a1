#pragma once
// The distribution spec's URL paths, built in one place: what berth puts in
// Location and Link, and what it asks upstream registries and peers for.
// Names, digests, tags and upload ids need no escaping in a path: their
// grammars allow only [A-Za-z0-9._:+=/-]. Each part is checked against its
// grammar (oci::Error when it fails), so no decoded '/', '?' or '#' a client
// sent can turn a path built here into another route.
#include <string>
#include <string_view>

namespace berth::oci::path {

// /v2/<name>/blobs/<digest>
std::string blob(std::string_view name, std::string_view digest);
// /v2/<name>/blobs/uploads/ (where a session starts)
std::string uploads(std::string_view name);
// /v2/<name>/blobs/uploads/<id>
std::string upload(std::string_view name, std::string_view id);
// /v2/<name>/manifests/<reference>
std::string manifest(std::string_view name, std::string_view reference);
// /v2/<name>/tags/list
std::string tags(std::string_view name);
// /v2/<name>/referrers/<digest>
std::string referrers(std::string_view name, std::string_view digest);
// /v2/_catalog
std::string catalog();

}  // namespace berth::oci::path
