#pragma once
// Checks on untrusted input shared by the registry operations.
#include <string>
#include <variant>

#include "berth/oci/digest.hpp"
#include "berth/registry/options.hpp"

namespace berth::registry {

// Throws NAME_INVALID unless repo matches the spec's grammar.
void require_name(const std::string& repo);

// A manifest reference: a tag, or a digest when it contains ':'. An invalid tag
// is TAG_INVALID when writing; when reading it names nothing, so MANIFEST_UNKNOWN.
using Reference = std::variant<std::string, oci::Digest>;
enum class Access { read, write };
Reference parse_reference(const std::string& reference, Access access);
void require_tag(const std::string& tag);

// Throws UNSUPPORTED on a pull-only registry (the node agent).
void require_writable(const Options& options);

}  // namespace berth::registry
