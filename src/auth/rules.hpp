#pragma once
#include <set>
#include <string>

#include "berth/auth/options.hpp"

namespace berth::auth {

// What a principal (empty name: anonymous) may do in a repository under these rules.
std::set<Action> allowed_actions(const Options& options, const std::string& user, const std::string& repository);

}  // namespace berth::auth
