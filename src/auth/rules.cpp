#include "rules.hpp"

#include <algorithm>

namespace berth::auth {

bool glob_match(std::string_view pattern, std::string_view text) {
    if (pattern.empty()) return text.empty();
    if (pattern.starts_with("**")) {
        auto rest = pattern.substr(2);
        for (std::size_t i = 0; i <= text.size(); ++i)
            if (glob_match(rest, text.substr(i))) return true;
        return false;
    }
    if (pattern[0] == '*') {
        auto rest = pattern.substr(1);
        for (std::size_t i = 0; i <= text.size(); ++i) {
            if (glob_match(rest, text.substr(i))) return true;
            if (i < text.size() && text[i] == '/') break;
        }
        return false;
    }
    return !text.empty() && pattern[0] == text[0] && glob_match(pattern.substr(1), text.substr(1));
}

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
        if (!glob_match(expand_user(rule.repository, user), repository)) continue;
        if (std::none_of(rule.principals.begin(), rule.principals.end(),
                         [&](auto& p) { return member(options, user, p); }))
            continue;
        out.insert(rule.actions.begin(), rule.actions.end());
    }
    return out;
}

}  // namespace berth::auth
