#pragma once
// A content digest "algorithm:hex" restricted to what berth can verify:
// sha256 (64 hex) and sha512 (128 hex), lowercase only.
#include <optional>
#include <string>
#include <string_view>

namespace berth::oci {

enum class DigestAlgorithm { sha256, sha512 };

std::string_view algorithm_name(DigestAlgorithm algorithm);
std::optional<DigestAlgorithm> parse_algorithm(std::string_view name);
std::size_t hex_length(DigestAlgorithm algorithm);

class Digest {
public:
    // nullopt unless the text is exactly a supported, well-formed digest.
    static std::optional<Digest> parse(std::string_view text);
    // Throws Error(digest_invalid) instead of returning nullopt.
    static Digest parse_or_throw(std::string_view text);
    static Digest of(DigestAlgorithm algorithm, std::string_view bytes);

    Digest(DigestAlgorithm algorithm, std::string hex);
    DigestAlgorithm algorithm() const { return algorithm_; }
    const std::string& hex() const { return hex_; }
    std::string str() const;

    friend bool operator==(const Digest&, const Digest&) = default;

private:
    DigestAlgorithm algorithm_;
    std::string hex_;
};

// Incremental hashing over OpenSSL's EVP interface; copyable so an upload can
// snapshot its state.
class Hasher {
public:
    explicit Hasher(DigestAlgorithm algorithm);
    ~Hasher();
    Hasher(const Hasher& other);
    Hasher& operator=(const Hasher&) = delete;

    void update(const void* data, std::size_t size);
    // Digest of everything so far; the hasher stays usable.
    Digest peek() const;
    DigestAlgorithm algorithm() const { return algorithm_; }

private:
    DigestAlgorithm algorithm_;
    void* ctx_;  // EVP_MD_CTX*, kept opaque so OpenSSL stays out of this header
};

}  // namespace berth::oci
