#pragma once
// The spec's grammar for repository names and tags.
#include <string>
#include <string_view>
#include <vector>

namespace berth::oci {

inline constexpr std::size_t max_name_length = 255;
inline constexpr std::size_t max_tag_length = 128;

// [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(\/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*
bool valid_repository_name(std::string_view name);
// [a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}
bool valid_tag(std::string_view tag);
// An upload session id as berth makes them (registry/upload_id.hpp): [a-z0-9_-]{1,128}. Nothing
// else may name an upload, reach the file system or be sent on to another replica.
bool valid_upload_id(std::string_view id);
// A registry host as the `ns` query parameter names it (distribution-spec
// main): lower-case DNS labels, at most 255 bytes, an optional :port.
bool valid_registry_host(std::string_view host);

// A repository's namespace: its name up to the first '/' (all of it when it
// has none). Quotas and usage are kept per namespace.
std::string_view namespace_of(std::string_view repository);

// Repository globs of the configuration: '*' matches within one path
// component, '**' across components.
bool glob_match(std::string_view pattern, std::string_view name);
bool matches_any(const std::vector<std::string>& patterns, std::string_view name);

}  // namespace berth::oci
