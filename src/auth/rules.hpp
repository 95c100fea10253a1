#pragma once
#include <set>
#include <string>

#include "berth/auth/authorizer.hpp"
#include "berth/auth/options.hpp"

namespace berth::auth {

// Whether a principal is what a rule's principal selector names ("user:NAME", "group:NAME",
// "authenticated", "anonymous").
bool member(const Options& options, const Principal& principal, const std::string& selector);
// What a principal (anonymous: no name) may do in a repository under these rules.
std::set<Action> allowed_actions(const Options& options, const Principal& principal, const std::string& repository);

}  // namespace berth::auth
