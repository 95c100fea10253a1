#pragma once
// Maps a request target to a row of the route table (routes.hpp). Pure string work, no Beast, so
// it is unit-tested directly. Path segments are percent-decoded after splitting, so an encoded '/'
// can never change which route matches.
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "routes.hpp"

namespace berth::http {

class Query {
public:
    static Query parse(std::string_view text);
    std::optional<std::string> get(std::string_view key) const;
    std::vector<std::string> all(std::string_view key) const;

private:
    std::vector<std::pair<std::string, std::string>> params_;
};

struct Target {
    const Route* route = nullptr;  // the unknown route's row when no other matched
    std::string name;              // the repository the pattern's {name} (or name_param) gave
    std::string reference;         // its {reference}: a tag or digest, a blob digest, an upload id; or {rest}
    Query query;
    std::string raw_query;  // "?..." as received, or empty
};

// nullopt when the target is not a path (absolute-form, '*', bad escapes).
std::optional<Target> parse_target(std::string_view target);

std::optional<std::string> percent_decode(std::string_view text, bool plus_is_space);

// Every part of a target meets its grammar before anything sees it (throws the spec's error), so
// nothing a client decoded (an encoded '/', '?' or '#') reaches a path built from it, the store,
// another replica, or the question the node agent asks: a name, and the route's Part (a PUT's bad
// tag is TAG_INVALID, a read's MANIFEST_UNKNOWN).
void require_valid_parts(const Target& target, bool put);

// Where an upload request goes on the replica owning its session: built from the checked name
// and id and the one query parameter an upload takes (digest), re-escaped.
std::string forwarded_upload_target(const Target& target);

}  // namespace berth::http
