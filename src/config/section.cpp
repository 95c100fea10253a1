#include "section.hpp"

#include "berth/net/host_port.hpp"

#include <cctype>
#include <fstream>
#include <stdexcept>

namespace berth::config {

void check_repository_globs(const std::string& key, const std::vector<std::string>& globs) {
    for (auto& glob : globs)
        if (glob.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789._-/*") != std::string::npos)
            throw ConfigError(key + ": \"" + glob + "\" is not a repository glob");
}

std::string readable_file(const std::string& key, const std::string& path) {
    std::ifstream in(path);
    if (!in) throw ConfigError(key + ": cannot read " + path);
    return path;
}

std::string secret_from(const std::string& key, const std::string& path) {
    std::ifstream in(readable_file(key, path));
    std::string secret;
    std::getline(in, secret);
    while (!secret.empty() && std::isspace(static_cast<unsigned char>(secret.back()))) secret.pop_back();
    if (secret.empty()) throw ConfigError(key + ": " + path + " is empty");
    return secret;
}

void check_url(const std::string& key, const std::string& url) {
    try {
        net::parse_url(url);
    } catch (const std::invalid_argument& error) {
        throw ConfigError(key + ": " + error.what());
    }
}

}  // namespace berth::config
