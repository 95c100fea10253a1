#pragma once
// A WWW-Authenticate challenge from an upstream (RFC 7235): the scheme and its
// parameters, as registries send them: Bearer realm="...",service="...",scope="...".
#include <map>
#include <string>
#include <string_view>

namespace berth::remote {

struct Challenge {
    std::string scheme;                         // lower case: "basic", "bearer"
    std::map<std::string, std::string> params;  // names lower case, values unquoted
};

// The first challenge in the header; an empty scheme when there is none.
Challenge parse_challenge(std::string_view header);

}  // namespace berth::remote
