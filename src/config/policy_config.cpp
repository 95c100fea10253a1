// The top-level `policies` list (registry/policies.hpp, docs/policies.md).
#include <array>
#include <nlohmann/json.hpp>

#include "berth/registry/policies.hpp"
#include "section.hpp"

namespace berth::config {
namespace {

void check_base_images(const std::string& where, const std::vector<std::string>& globs) {
    for (auto& glob : globs) {
        auto colon = glob.rfind(':');
        auto repository = colon == std::string::npos ? std::string() : glob.substr(0, colon);
        if (repository.empty() || colon + 1 == glob.size() || repository.find('/', 0) == 0)
            throw ConfigError(where + ": \"" + glob + "\" is not REPOSITORY:TAG (globs allowed in both)");
        check_repository_globs(where, {repository});
    }
}

// Each kind of rule's section of a policy (registry/policies.hpp): a new kind is its rule's file
// and one of these.
void immutable_tags(Section& s, const std::string&, registry::Policy& policy, Reading&) {
    bool on = false;
    s.boolean("immutable_tags", on);
    if (on) policy.rules.push_back(registry::immutable_tags_rule());
}

void require_signature(Section& s, const std::string& where, registry::Policy& policy, Reading& r) {
    s.section("require_signature", [&](Section& sig) {
        trust::SignatureRule rule{policy.name, {}, false};
        sig.strings("keys", rule.keys);
        sig.boolean("match_repository", rule.match_repository);
        if (rule.keys.empty()) throw ConfigError(where + ".require_signature.keys must list PEM public key files");
        for (auto& key : rule.keys) key = readable_file(where + ".require_signature.keys", r.path_of(key));
        r.config.signature_rules.push_back(std::move(rule));
        policy.rules.push_back(registry::signature_rule());
    });
}

void base_images(Section& s, const std::string& where, registry::Policy& policy, Reading& r) {
    std::vector<std::string> globs;
    s.strings("base_images", globs);
    if (globs.empty()) return;
    check_base_images(where + ".base_images", globs);
    auto& bases = r.config.notifications.base_images;
    bases.insert(bases.end(), globs.begin(), globs.end());
    policy.rules.push_back(registry::base_images_rule(std::move(globs)));
}

constexpr std::array kinds = {immutable_tags, require_signature, base_images};

}  // namespace

void read_policies(const json& list, Reading& r) {
    for (std::size_t i = 0; i < list.size(); ++i) {
        const auto where = "policies[" + std::to_string(i) + "]";
        Section s(list[i], where);
        registry::Policy policy;
        policy.name = where;
        s.string("name", policy.name, false);
        s.strings("repositories", policy.repositories);
        for (auto& kind : kinds) kind(s, where, policy, r);
        s.finish();
        if (policy.repositories.empty()) throw ConfigError(where + ".repositories must list repository globs");
        check_repository_globs(where + ".repositories", policy.repositories);
        if (policy.rules.empty())
            throw ConfigError(where + " has no rule: give immutable_tags, require_signature or base_images");
        for (auto& other : r.config.registry.policies)
            if (other.name == policy.name) throw ConfigError(where + ".name: \"" + policy.name + "\" is listed twice");
        r.config.registry.policies.push_back(std::move(policy));
    }
    r.config.retention.immutable = r.config.registry.policies;
}

}  // namespace berth::config
