// berth credential-provider: the kubelet's image credential provider (k8s/node/kubelet/).
#include <chrono>
#include <iostream>

#include "berth/auth/credential_provider.hpp"
#include "commands.hpp"

namespace berth::cli {
namespace {

constexpr const char* credential_provider_help =
    R"(Usage: berth credential-provider [--registry HOST[:PORT]]... [--username NAME]

The kubelet's image credential provider (credentialprovider.kubelet.k8s.io/v1):
reads a CredentialProviderRequest on stdin and writes a CredentialProviderResponse
giving the pod's service account token as the password for each --registry (the
replicas' Service, the node agent, mirrored upstream hosts; default: the image's
own registry). k8s/node/credential-provider-config.yaml shows the kubelet side.
)";

}  // namespace

int credential_provider(const std::vector<std::string>& args) {
    auto arguments = parse_arguments(args, {"--registry", "--username"}, {});
    if (arguments.help) {
        std::cout << credential_provider_help;
        return 0;
    }
    if (!arguments.rest.empty()) throw UsageError("unexpected argument " + arguments.rest.front());
    auth::CredentialProviderOptions options;
    if (auto registries = arguments.values.find("--registry"); registries != arguments.values.end())
        options.registries = registries->second;
    if (auto username = arguments.value("--username")) options.username = *username;
    std::string request(auth::max_credential_request_bytes + 1, '\0');
    std::cin.read(request.data(), static_cast<std::streamsize>(request.size()));
    request.resize(static_cast<std::size_t>(std::cin.gcount()));
    try {
        std::cout << auth::credential_provider_response(request, options, std::chrono::system_clock::now()) << "\n";
    } catch (const std::invalid_argument& error) {
        std::cerr << "berth credential-provider: " << error.what() << "\n";
        return 1;
    }
    return 0;
}

}  // namespace berth::cli
