#include "berth/oci/digest.hpp"

#include <openssl/evp.h>

#include <stdexcept>

#include "berth/oci/error.hpp"
#include "berth/oci/encoding.hpp"

namespace berth::oci {
namespace {

const EVP_MD* evp_md(DigestAlgorithm algorithm) {
    return algorithm == DigestAlgorithm::sha256 ? EVP_sha256() : EVP_sha512();
}

bool lower_hex(std::string_view text) {
    for (char c : text)
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    return true;
}

}  // namespace

std::string_view algorithm_name(DigestAlgorithm algorithm) {
    return algorithm == DigestAlgorithm::sha256 ? "sha256" : "sha512";
}

std::optional<DigestAlgorithm> parse_algorithm(std::string_view name) {
    if (name == "sha256") return DigestAlgorithm::sha256;
    if (name == "sha512") return DigestAlgorithm::sha512;
    return std::nullopt;
}

std::size_t hex_length(DigestAlgorithm algorithm) { return algorithm == DigestAlgorithm::sha256 ? 64 : 128; }

std::optional<Digest> Digest::parse(std::string_view text) {
    auto colon = text.find(':');
    if (colon == std::string_view::npos) return std::nullopt;
    auto algorithm = parse_algorithm(text.substr(0, colon));
    if (!algorithm) return std::nullopt;
    auto hex = text.substr(colon + 1);
    if (hex.size() != hex_length(*algorithm) || !lower_hex(hex)) return std::nullopt;
    return Digest(*algorithm, std::string(hex));
}

Digest Digest::parse_or_throw(std::string_view text) {
    auto digest = parse(text);
    if (!digest) throw Error(ErrorCode::digest_invalid, "invalid digest", std::string(text.substr(0, 200)));
    return *digest;
}

Digest Digest::of(DigestAlgorithm algorithm, std::string_view bytes) {
    Hasher hasher(algorithm);
    hasher.update(bytes.data(), bytes.size());
    return hasher.peek();
}

Digest::Digest(DigestAlgorithm algorithm, std::string hex) : algorithm_(algorithm), hex_(std::move(hex)) {}

std::string Digest::str() const {
    std::string out(algorithm_name(algorithm_));
    out += ':';
    out += hex_;
    return out;
}

Hasher::Hasher(DigestAlgorithm algorithm) : algorithm_(algorithm), ctx_(EVP_MD_CTX_new()) {
    if (!ctx_ || EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), evp_md(algorithm), nullptr) != 1)
        throw std::runtime_error("EVP_DigestInit_ex failed");
}

Hasher::~Hasher() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

Hasher::Hasher(const Hasher& other) : algorithm_(other.algorithm_), ctx_(EVP_MD_CTX_new()) {
    if (!ctx_ || EVP_MD_CTX_copy_ex(static_cast<EVP_MD_CTX*>(ctx_), static_cast<EVP_MD_CTX*>(other.ctx_)) != 1)
        throw std::runtime_error("EVP_MD_CTX_copy_ex failed");
}

void Hasher::update(const void* data, std::size_t size) {
    EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data, size);
}

Digest Hasher::peek() const {
    Hasher copy(*this);
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned size = 0;
    EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(copy.ctx_), out, &size);
    return Digest(algorithm_, hex(std::string_view(reinterpret_cast<const char*>(out), size)));
}

}  // namespace berth::oci
