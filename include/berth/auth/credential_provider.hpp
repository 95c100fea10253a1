#pragma once
// `berth credential-provider`: the kubelet's image credential provider exec plugin
// (credentialprovider.kubelet.k8s.io/v1). Given the pod's own service account token
// (KEP-4412: the kubelet passes it when the provider's tokenAttributes name an audience),
// it answers with that token as the password for the registries berth serves, so a pod
// pulls as its own identity and the rules judge it (docs/auth.md).
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace berth::auth {

struct CredentialProviderOptions {
    // HOST[:PORT] patterns the credentials are for (the replicas' Service, the node agent,
    // mirrored upstream hosts); empty: the requested image's own registry.
    std::vector<std::string> registries;
    std::string username = "serviceaccount";  // berth ignores it; some clients want one
};

inline constexpr std::size_t max_credential_request_bytes = 1 << 20;

// The CredentialProviderResponse to a CredentialProviderRequest's JSON. Without a token the
// answer holds no credentials (the kubelet pulls without). Throws std::invalid_argument for
// a request that is not one.
std::string credential_provider_response(std::string_view request, const CredentialProviderOptions& options,
                                         std::chrono::system_clock::time_point now);

}  // namespace berth::auth
