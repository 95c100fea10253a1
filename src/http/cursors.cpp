#include "cursors.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <memory>

#include "berth/oci/encoding.hpp"
#include "berth/oci/error.hpp"

namespace berth::http {
namespace {

constexpr std::size_t nonce_bytes = 12, tag_bytes = 16;
constexpr std::size_t max_sealed = 2048;
// Every name is sealed at this length (names are at most 255 bytes, a lineage cursor
// REPOSITORY@DIGEST at most 391), so a cursor's length says nothing of what it names.
constexpr std::size_t sealed_length = 512;

using CipherContext = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;

const unsigned char* bytes(const std::string& text) { return reinterpret_cast<const unsigned char*>(text.data()); }

}  // namespace

Cursors::Cursors(std::string key) : key_(key.empty() ? oci::random_bytes(32) : std::move(key)) {}

std::string Cursors::next(const std::string& text, bool visible) const {
    if (visible) return text;
    return seal(text.substr(0, sealed_length), sealed_length);
}

std::string Cursors::open(const std::string& last) const {
    if (!sealed(last)) return last;
    return unseal(last, max_sealed, "last is no cursor this registry gave");
}

std::string Cursors::seal(const std::string& text, std::size_t block) const {
    std::string name = text;
    name.resize(std::max<std::size_t>(1, (text.size() + block - 1) / block) * block, '\0');
    const auto nonce = oci::random_bytes(nonce_bytes);
    std::string sealed(name.size() + tag_bytes, '\0');
    CipherContext context(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
    int length = 0, last = 0;
    auto* out = reinterpret_cast<unsigned char*>(sealed.data());
    if (!context || EVP_EncryptInit_ex(context.get(), EVP_aes_256_gcm(), nullptr, bytes(key_), bytes(nonce)) != 1 ||
        EVP_EncryptUpdate(context.get(), out, &length, bytes(name), static_cast<int>(name.size())) != 1 ||
        EVP_EncryptFinal_ex(context.get(), out + length, &last) != 1 ||
        EVP_CIPHER_CTX_ctrl(context.get(), EVP_CTRL_GCM_GET_TAG, tag_bytes, out + name.size()) != 1)
        throw std::runtime_error("cannot seal a cursor");
    return "~" + oci::base64url(nonce + sealed);
}

std::string Cursors::unseal(const std::string& text, std::size_t max_chars, const char* refusal) const {
    const auto raw = sealed(text) && text.size() <= max_chars ? oci::base64url_decode(text.substr(1)) : std::nullopt;
    if (!raw || raw->size() < nonce_bytes + tag_bytes) throw oci::Error(oci::ErrorCode::bad_request, refusal);
    const auto size = raw->size() - nonce_bytes - tag_bytes;
    std::string name(size, '\0');
    std::string tag = raw->substr(nonce_bytes + size);
    CipherContext context(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
    int length = 0, final_length = 0;
    const bool opened =
        context && EVP_DecryptInit_ex(context.get(), EVP_aes_256_gcm(), nullptr, bytes(key_), bytes(*raw)) == 1 &&
        EVP_DecryptUpdate(context.get(), reinterpret_cast<unsigned char*>(name.data()), &length,
                          bytes(*raw) + nonce_bytes, static_cast<int>(size)) == 1 &&
        EVP_CIPHER_CTX_ctrl(context.get(), EVP_CTRL_GCM_SET_TAG, tag_bytes, tag.data()) == 1 &&
        EVP_DecryptFinal_ex(context.get(), reinterpret_cast<unsigned char*>(name.data()) + length, &final_length) == 1;
    if (!opened) throw oci::Error(oci::ErrorCode::bad_request, refusal);
    name.resize(name.find('\0') == std::string::npos ? name.size() : name.find('\0'));
    return name;
}

}  // namespace berth::http
