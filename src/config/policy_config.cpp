// The top-level `policies` list (registry/policies.hpp, docs/policies.md).
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

}  // namespace

void read_policies(const json& list, Reading& r) {
    for (std::size_t i = 0; i < list.size(); ++i) {
        const auto where = "policies[" + std::to_string(i) + "]";
        Section s(list[i], where);
        registry::Policy policy;
        policy.name = where;
        s.string("name", policy.name, false);
        s.strings("repositories", policy.repositories);
        s.boolean("immutable_tags", policy.immutable_tags);
        s.section("require_signature", [&](Section& sig) {
            registry::SignatureRule rule;
            sig.strings("keys", rule.keys);
            sig.boolean("match_repository", rule.match_repository);
            if (rule.keys.empty()) throw ConfigError(where + ".require_signature.keys must list PEM public key files");
            for (auto& key : rule.keys) key = readable_file(where + ".require_signature.keys", r.path_of(key));
            policy.require_signature = std::move(rule);
        });
        s.strings("base_images", policy.base_images);
        s.finish();
        if (policy.repositories.empty()) throw ConfigError(where + ".repositories must list repository globs");
        check_repository_globs(where + ".repositories", policy.repositories);
        check_base_images(where + ".base_images", policy.base_images);
        if (!policy.immutable_tags && !policy.require_signature && policy.base_images.empty())
            throw ConfigError(where + " has no rule: give immutable_tags, require_signature or base_images");
        for (auto& other : r.config.registry.policies)
            if (other.name == policy.name) throw ConfigError(where + ".name: \"" + policy.name + "\" is listed twice");
        r.config.registry.policies.push_back(std::move(policy));
    }
    r.config.retention.immutable = r.config.registry.policies;
}

}  // namespace berth::config
