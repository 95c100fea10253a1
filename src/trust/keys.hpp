#pragma once
// Public keys that signatures are verified with, from PEM files named by a
// policy (require_signature.keys), read again when a file changes.
#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace berth::trust {

class PublicKey {
public:
    // ECDSA (P-256, P-384, P-521), RSA or Ed25519; throws std::runtime_error for anything else.
    static std::shared_ptr<PublicKey> from_pem(std::string_view pem, std::string name);
    ~PublicKey();
    PublicKey(const PublicKey&) = delete;
    PublicKey& operator=(const PublicKey&) = delete;

    const std::string& name() const { return name_; }
    // As cosign and containers/image sign: ECDSA (DER) with the curve's hash or SHA-256, RSA
    // PKCS#1 v1.5 with SHA-256, pure Ed25519.
    bool verify(std::string_view data, std::string_view signature) const;

private:
    PublicKey(void* pkey, std::string name);
    void* pkey_;  // EVP_PKEY*
    std::string name_;
};

// The keys of one policy. current() looks at the files at most once a second and reads a
// changed one again; a file that cannot be read or parsed keeps its last good key.
class KeySet {
public:
    // Throws std::runtime_error naming a file that cannot be used now.
    explicit KeySet(std::vector<std::string> files);

    struct Snapshot {
        std::vector<std::shared_ptr<PublicKey>> keys;
        std::uint64_t generation = 0;  // changes whenever a key does
    };
    Snapshot current();

private:
    struct File {
        std::string path;
        std::filesystem::file_time_type mtime;
        std::shared_ptr<PublicKey> key;
    };
    std::mutex mutex_;
    std::vector<File> files_;
    std::uint64_t generation_ = 1;
    std::chrono::steady_clock::time_point checked_{};
};

}  // namespace berth::trust
