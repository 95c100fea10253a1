#include "rules.hpp"

#include <algorithm>

#include "berth/oci/names.hpp"

namespace berth::auth {

bool member(const Options& options, const Principal& principal, const std::string& selector) {
    if (selector == "anonymous") return principal.anonymous();
    if (selector == "authenticated") return !principal.anonymous();
    if (principal.anonymous()) return false;
    if (selector == "user:" + principal.name) return true;
    if (selector.starts_with("group:")) {
        const auto name = selector.substr(6);
        if (std::find(principal.groups.begin(), principal.groups.end(), name) != principal.groups.end()) return true;
        auto group = options.groups.find(name);
        return group != options.groups.end() &&
               std::find(group->second.begin(), group->second.end(), principal.name) != group->second.end();
    }
    return false;
}

namespace {

void expand(std::string& pattern, std::string_view variable, const std::string& value) {
    for (auto at = pattern.find(variable); at != std::string::npos; at = pattern.find(variable, at + value.size()))
        pattern.replace(at, variable.size(), value);
}

// A name that may stand for a variable: one repository path component. A name a user chose (a
// token's preferred_username, say) must not bring '*' or '/' into the glob: "*" as ${user} would
// turn "${user}/**" into every repository.
bool one_component(const std::string& value) {
    return !value.empty() && value.find('/') == std::string::npos && oci::valid_repository_name(value);
}

// The rule's repository glob for this principal; nullopt when it names a variable the principal
// has no value for (an anonymous ${user}, a ${namespace} of someone who is no service account),
// or a value that is not one path component.
std::optional<std::string> repository_glob(const Rule& rule, const Principal& principal) {
    std::string glob = rule.repository;
    if (glob.find("${user}") != std::string::npos) {
        if (!one_component(principal.name)) return std::nullopt;
        expand(glob, "${user}", principal.name);
    }
    if (glob.find("${namespace}") != std::string::npos) {
        if (!one_component(principal.ns)) return std::nullopt;
        expand(glob, "${namespace}", principal.ns);
    }
    return glob;
}

}  // namespace

std::set<Action> allowed_actions(const Options& options, const Principal& principal, const std::string& repository) {
    std::set<Action> out;
    if (options.rules.empty()) {
        // No rules: every signed-in user may do everything, strangers nothing.
        if (!principal.anonymous()) out = {Action::pull, Action::push, Action::del};
        return out;
    }
    for (auto& rule : options.rules) {
        auto glob = repository_glob(rule, principal);
        if (!glob || !oci::glob_match(*glob, repository)) continue;
        if (std::none_of(rule.principals.begin(), rule.principals.end(),
                         [&](auto& p) { return member(options, principal, p); }))
            continue;
        out.insert(rule.actions.begin(), rule.actions.end());
    }
    return out;
}

}  // namespace berth::auth
