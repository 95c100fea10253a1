#include "berth/auth/credential_provider.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "berth/oci/json.hpp"
#include "jwt.hpp"

namespace berth::auth {
namespace {

using nlohmann::json;

constexpr const char* api_version = "credentialprovider.kubelet.k8s.io/v1";
// Credentials are cached until shortly before the token expires, so the kubelet never
// presents an expired one.
constexpr long long expiry_margin_seconds = 60;

// The registry of an image reference as the kubelet matches it: the first path component when
// it names a host (a dot or a port, or localhost), else Docker Hub.
std::string registry_of(const std::string& image) {
    const auto slash = image.find('/');
    if (slash == std::string::npos) return "docker.io";
    const auto first = image.substr(0, slash);
    if (first.find_first_of(".:") != std::string::npos || first == "localhost") return first;
    return "docker.io";
}

std::string text_field(const json& doc, const char* key, bool required) {
    auto it = doc.find(key);
    if (it == doc.end() || it->is_null()) {
        if (required) throw std::invalid_argument(std::string("a CredentialProviderRequest without ") + key);
        return {};
    }
    if (!it->is_string()) throw std::invalid_argument(std::string(key) + " is not a string");
    return it->get<std::string>();
}

}  // namespace

std::string credential_provider_response(std::string_view request, const CredentialProviderOptions& options,
                                         std::chrono::system_clock::time_point now) {
    if (request.size() > max_credential_request_bytes) throw std::invalid_argument("request larger than 1 MiB");
    auto doc = oci::parse_json(request);
    if (!doc.is_object()) throw std::invalid_argument("not a CredentialProviderRequest (JSON object)");
    if (text_field(doc, "kind", true) != "CredentialProviderRequest")
        throw std::invalid_argument("kind is not CredentialProviderRequest");
    if (text_field(doc, "apiVersion", true) != api_version)
        throw std::invalid_argument(std::string("apiVersion is not ") + api_version);
    const auto image = text_field(doc, "image", true);
    const auto token = text_field(doc, "serviceAccountToken", false);

    json response = {{"apiVersion", api_version}, {"kind", "CredentialProviderResponse"}};
    if (token.empty()) {
        response["cacheKeyType"] = "Image";
        response["cacheDuration"] = "0s";
        return response.dump();
    }
    const auto now_s = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
    // The token's exp, unverified: it only bounds how long the kubelet keeps it.
    const auto peeked = peek_jwt(token);
    const auto left = (peeked ? peeked->expires : std::nullopt).value_or(now_s) - now_s - expiry_margin_seconds;
    response["cacheKeyType"] = "Registry";
    response["cacheDuration"] = std::to_string(std::max<long long>(left, 0)) + "s";
    // The token itself is the credential, valid only as long as its pod: cached per pod.
    response["serviceAccountTokenCacheType"] = "Pod";
    auto registries = options.registries;
    if (registries.empty()) registries.push_back(registry_of(image));
    json auth = json::object();
    for (auto& registry : registries) auth[registry] = {{"username", options.username}, {"password", token}};
    response["auth"] = std::move(auth);
    return response.dump();
}

}  // namespace berth::auth
