#include "berth/oci/derived_keys.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <stdexcept>

namespace berth::oci {
namespace {

constexpr std::string_view salt = "berth derived keys v1";

}  // namespace

DerivedKeys::DerivedKeys(std::string_view secret) : stretched_(32, '\0') {
    // N 2^15, r 8, p 1: 32 MiB and about 0.1 s, once at start.
    if (EVP_PBE_scrypt(secret.data(), secret.size(), reinterpret_cast<const unsigned char*>(salt.data()), salt.size(),
                       1 << 15, 8, 1, 64 << 20, reinterpret_cast<unsigned char*>(stretched_.data()),
                       stretched_.size()) != 1)
        throw std::runtime_error("cannot derive keys from the secret (scrypt)");
}

// HKDF-Expand (RFC 5869) of one block: HMAC-SHA256(PRK, label || 0x01).
std::string DerivedKeys::key(std::string_view label) const {
    std::string info(label);
    info.push_back('\x01');
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    HMAC(EVP_sha256(), stretched_.data(), static_cast<int>(stretched_.size()),
         reinterpret_cast<const unsigned char*>(info.data()), info.size(), out, &length);
    return std::string(reinterpret_cast<const char*>(out), length);
}

}  // namespace berth::oci
