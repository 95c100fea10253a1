#pragma once
#include <set>
#include <string>

#include "berth/auth/authorizer.hpp"
#include "berth/auth/options.hpp"

namespace berth::auth {

// What a principal (anonymous: no name) may do in a repository under these rules.
std::set<Action> allowed_actions(const Options& options, const Principal& principal, const std::string& repository);

}  // namespace berth::auth
