#include "htpasswd.hpp"

#include <crypt.h>
#include <openssl/evp.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <thread>
#include <nlohmann/json.hpp>

#include "berth/oci/encoding.hpp"
#include "berth/observe/log.hpp"

namespace berth::auth {
namespace {

// bcrypt's cost, from $2b$NN$...; 10 (htpasswd's default) when unreadable.
int cost_of(const std::string& hash) {
    if (hash.size() < 7 || hash[6] != '$') return 10;
    const int cost = (hash[4] - '0') * 10 + (hash[5] - '0');
    return cost >= 4 && cost <= 31 ? cost : 10;
}

// A bcrypt hash of random bytes at that cost: nothing logs in with it.
std::string decoy_hash(int cost) {
    char setting[CRYPT_GENSALT_OUTPUT_SIZE];
    const auto entropy = oci::random_bytes(16);
    if (!crypt_gensalt_rn("$2b$", static_cast<unsigned long>(cost), entropy.data(), static_cast<int>(entropy.size()),
                          setting, sizeof setting))
        return {};
    auto data = std::make_unique<crypt_data>();
    const char* hash = crypt_r(oci::random_hex(16).c_str(), setting, data.get());
    return hash ? hash : "";
}

std::string sha256(const std::string& text) {
    unsigned char digest[32];
    unsigned size = 0;
    EVP_Digest(text.data(), text.size(), digest, &size, EVP_sha256(), nullptr);
    return std::string(reinterpret_cast<char*>(digest), size);
}

}  // namespace

Htpasswd::Htpasswd(std::filesystem::path file) : file_(std::move(file)) {
    std::lock_guard lock(mutex_);
    reload_if_changed();
    if (loaded_at_ == std::filesystem::file_time_type{})
        throw std::runtime_error("cannot read htpasswd file " + file_.string());
}

void Htpasswd::reload_if_changed() {
    const auto now = std::chrono::steady_clock::now();
    if (now - checked_at_ < std::chrono::seconds(2)) return;
    checked_at_ = now;
    std::error_code ec;
    auto modified = std::filesystem::last_write_time(file_, ec);
    if (ec || modified == loaded_at_) return;
    std::ifstream in(file_);
    if (!in) return;
    std::map<std::string, std::string> hashes;
    std::string line;
    while (std::getline(in, line)) {
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
        auto colon = line.find(':');
        if (line.empty() || line[0] == '#' || colon == std::string::npos) continue;
        auto hash = line.substr(colon + 1);
        if (!(hash.starts_with("$2y$") || hash.starts_with("$2b$") || hash.starts_with("$2a$"))) {
            observe::log("warn", "htpasswd entry is not bcrypt; ignored", {{"user", line.substr(0, colon)}});
            continue;
        }
        hashes[line.substr(0, colon)] = hash;
    }
    int cost = 4;
    for (auto& [user, hash] : hashes) cost = std::max(cost, cost_of(hash));
    if (decoy_.empty() || cost_of(decoy_) != cost) {
        const auto started = std::chrono::steady_clock::now();
        decoy_ = decoy_hash(cost);
        decoy_time_ = std::chrono::steady_clock::now() - started;
    }
    hashes_ = std::move(hashes);
    recent_.clear();
    loaded_at_ = modified;
}

std::string Htpasswd::generation(const std::string& user) {
    std::lock_guard lock(mutex_);
    reload_if_changed();
    auto it = hashes_.find(user);
    return it == hashes_.end() ? std::string() : oci::hex(sha256(it->second)).substr(0, 16);
}

bool Htpasswd::verify(const std::string& user, const std::string& password) {
    std::string hash;
    bool user_known = true;
    const auto fingerprint = sha256(password);
    {
        std::lock_guard lock(mutex_);
        reload_if_changed();
        auto it = hashes_.find(user);
        auto seen = recent_.find(user);
        if (it != hashes_.end() && seen != recent_.end() && seen->second.second > std::chrono::steady_clock::now() &&
            oci::equal_secrets(seen->second.first, fingerprint))
            return true;
        hash = it != hashes_.end() ? it->second : decoy_;
        if (it == hashes_.end()) user_known = false;
    }
    const auto started = std::chrono::steady_clock::now();
    auto data = std::make_unique<crypt_data>();
    const char* result = hash.empty() ? nullptr : crypt_r(password.c_str(), hash.c_str(), data.get());
    const bool matched = user_known && result && oci::equal_secrets(result, hash);
    if (cost_of(hash) < cost_of(decoy_)) std::this_thread::sleep_until(started + decoy_time_);
    if (!matched) return false;
    std::lock_guard lock(mutex_);
    recent_[user] = {fingerprint, std::chrono::steady_clock::now() + std::chrono::minutes(5)};
    return true;
}

}  // namespace berth::auth
