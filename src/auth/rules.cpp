#include "rules.hpp"

#include <algorithm>

#include "berth/oci/names.hpp"

namespace berth::auth {

namespace {

bool member(const Options& options, const std::string& user, const std::string& selector) {
    if (selector == "anonymous") return user.empty();
    if (selector == "authenticated") return !user.empty();
    if (user.empty()) return false;
    if (selector == "user:" + user) return true;
    if (selector.starts_with("group:")) {
        auto group = options.groups.find(selector.substr(6));
        return group != options.groups.end() &&
               std::find(group->second.begin(), group->second.end(), user) != group->second.end();
    }
    return false;
}

std::string expand_user(const std::string& pattern, const std::string& user) {
    std::string out = pattern;
    for (auto at = out.find("${user}"); at != std::string::npos; at = out.find("${user}", at + user.size()))
        out.replace(at, 7, user);
    return out;
}

}  // namespace

std::set<Action> allowed_actions(const Options& options, const std::string& user, const std::string& repository) {
    std::set<Action> out;
    if (options.rules.empty()) {
        // No rules: every signed-in user may do everything, strangers nothing.
        if (!user.empty()) out = {Action::pull, Action::push, Action::del};
        return out;
    }
    for (auto& rule : options.rules) {
        if (rule.repository.find("${user}") != std::string::npos && user.empty()) continue;
        if (!oci::glob_match(expand_user(rule.repository, user), repository)) continue;
        if (std::none_of(rule.principals.begin(), rule.principals.end(),
                         [&](auto& p) { return member(options, user, p); }))
            continue;
        out.insert(rule.actions.begin(), rule.actions.end());
    }
    return out;
}

}  // namespace berth::auth
