#pragma once
// An htpasswd file with bcrypt hashes, as `htpasswd -B` writes it. Reloaded
// when it changes. Successful checks are remembered for a few minutes, since
// bcrypt is deliberately slow and clients send Basic credentials on every request.
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>

namespace berth::auth {

class Htpasswd {
public:
    explicit Htpasswd(std::filesystem::path file);
    bool verify(const std::string& user, const std::string& password);
    // A short fingerprint of the user's entry (its hash), "" when the file does not hold the user:
    // a web UI session remembers it, and ends when it changes (a new password, the user removed).
    std::string generation(const std::string& user);

private:
    void reload_if_changed();

    std::filesystem::path file_;
    std::mutex mutex_;
    std::filesystem::file_time_type loaded_at_{};
    std::chrono::steady_clock::time_point checked_at_{};
    std::map<std::string, std::string> hashes_;
    // A hash at the file's highest cost, checked for names the file does not hold, and how long
    // that takes: an unknown user costs what a wrong password does, and a user whose hash is
    // cheaper is made to wait as long, so timing does not say who exists.
    std::string decoy_;
    std::chrono::steady_clock::duration decoy_time_{};
    // user -> (sha256 of the password that matched, when it expires)
    std::map<std::string, std::pair<std::string, std::chrono::steady_clock::time_point>> recent_;
};

}  // namespace berth::auth
