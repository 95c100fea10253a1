#include "issuer_documents.hpp"

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "berth/net/host_port.hpp"
#include "berth/oci/json.hpp"
#include "key_source.hpp"

namespace berth::auth {
namespace {

using nlohmann::json;

std::string string_claim(const json& claims, const std::string& name) {
    auto it = claims.find(name);
    return it != claims.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Kubernetes' names (RFC 1123): a namespace is a label, a service account a subdomain.
bool dns_name(const std::string& name, std::size_t max, bool dots) {
    if (name.empty() || name.size() > max || name.front() == '-' || name.back() == '-' || name.front() == '.' ||
        name.back() == '.')
        return false;
    return name.find_first_not_of(dots ? "abcdefghijklmnopqrstuvwxyz0123456789-."
                                       : "abcdefghijklmnopqrstuvwxyz0123456789-") == std::string::npos;
}

}  // namespace

std::string jwks_uri_of(std::string_view document, const std::string& issuer, const std::string& where) {
    auto discovery = oci::parse_json(document);
    auto field = [&](const char* key) {
        auto it = discovery.is_object() ? discovery.find(key) : discovery.end();
        if (it == discovery.end() || !it->is_string())
            throw std::runtime_error(where + ": no " + key + " in the discovery document");
        return it->get<std::string>();
    };
    if (field("issuer") != issuer)
        throw std::runtime_error(where + " names issuer \"" + field("issuer").substr(0, 256) + "\", not \"" + issuer +
                                 "\"");
    auto uri = field("jwks_uri");
    try {
        net::parse_url(uri);
    } catch (const std::invalid_argument& error) {
        throw std::runtime_error(where + ": jwks_uri: " + error.what());
    }
    return uri;
}

std::vector<std::shared_ptr<JwtKey>> parse_key_set(std::string_view text, const std::string& where) {
    if (text.size() > max_key_set_bytes) throw std::runtime_error(where + ": key set larger than 256 KiB");
    auto doc = oci::parse_json(text);
    if (!doc.is_object() || !doc.contains("keys") || !doc["keys"].is_array())
        throw std::runtime_error(where + ": not a JWK Set ({\"keys\": [...]})");
    std::vector<std::shared_ptr<JwtKey>> keys;
    std::string skipped;
    for (auto& jwk : doc["keys"]) {
        if (keys.size() == max_keys) break;
        try {
            keys.push_back(JwtKey::from_jwk(jwk));
        } catch (const std::exception& error) {
            skipped = error.what();  // an encryption key, say: not ours to use
        }
    }
    if (keys.empty())
        throw std::runtime_error(where + ": no usable signing key" + (skipped.empty() ? "" : ": " + skipped));
    return keys;
}

std::optional<Principal> service_account_of(const json& claims) {
    auto k8s = claims.find("kubernetes.io");
    if (k8s == claims.end() || !k8s->is_object()) return std::nullopt;
    auto ns = k8s->find("namespace");
    auto account = k8s->find("serviceaccount");
    if (ns == k8s->end() || !ns->is_string() || account == k8s->end() || !account->is_object()) return std::nullopt;
    auto name = account->find("name");
    if (name == account->end() || !name->is_string()) return std::nullopt;
    const auto space = ns->get<std::string>();
    if (!dns_name(space, 63, false) || !dns_name(name->get<std::string>(), 253, true)) return std::nullopt;
    return Principal{"system:serviceaccount:" + space + ":" + name->get<std::string>(),
                     {"system:serviceaccounts", "system:serviceaccounts:" + space},
                     space};
}

Principal principal_of(const OidcIssuer& issuer, const json& claims, std::string& error) {
    const auto user_prefix = issuer.user_prefix(), group_prefix = issuer.group_prefix();
    if (issuer.service_accounts) {
        auto account = service_account_of(claims);
        if (!account) {
            error = "a service account issuer's token without a service account";
            return {};
        }
        account->name = user_prefix + account->name;
        for (auto& group : account->groups) group = group_prefix + group;
        return *account;
    }
    // Any other issuer's kubernetes.io claim is only a claim: its users are its own.
    Principal principal{string_claim(claims, issuer.username_claim), {}, {}};
    if (principal.name.empty()) {
        error = "token has no " + issuer.username_claim + " claim";
        return principal;
    }
    principal.name = user_prefix + principal.name;
    if (auto groups = claims.find(issuer.groups_claim); groups != claims.end() && groups->is_array())
        for (auto& group : *groups)
            if (group.is_string() && principal.groups.size() < max_groups)
                principal.groups.push_back(group_prefix + group.get<std::string>());
    return principal;
}

}  // namespace berth::auth
