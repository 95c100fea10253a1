#pragma once
#include <set>
#include <string>

#include "berth/auth/options.hpp"

namespace berth::auth {

// '*' matches within one path component, '**' across components.
bool glob_match(std::string_view pattern, std::string_view text);

// What a principal (empty name: anonymous) may do in a repository under these rules.
std::set<Action> allowed_actions(const Options& options, const std::string& user, const std::string& repository);

}  // namespace berth::auth
