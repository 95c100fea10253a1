#include "tls_record_sealer.hpp"

#include <linux/tls.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/kdf.h>

#include <algorithm>
#include <cstring>

namespace berth::http {

namespace {

constexpr std::uint8_t application_data = 23, handshake = 22;
constexpr std::uint8_t key_update_message = 24;
constexpr std::size_t tag_bytes = 16;

// The send keys of one AES-GCM suite, however long its key.
template <typename Info>
bool load(EVP_CIPHER_CTX* ctx, const EVP_CIPHER* cipher, const Info& info, unsigned char (&iv)[12],
          std::uint64_t& sequence) {
    static_assert(sizeof info.salt + sizeof info.iv == 12);
    std::memcpy(iv, info.salt, sizeof info.salt);
    std::memcpy(iv + sizeof info.salt, info.iv, sizeof info.iv);
    sequence = 0;
    for (auto byte : info.rec_seq) sequence = sequence << 8 | byte;
    return EVP_EncryptInit_ex(ctx, cipher, nullptr, info.key, nullptr) == 1;
}

// Is this handshake write a KeyUpdate? OpenSSL writes each handshake message
// on its own, and a KeyUpdate is 5 bytes (type, 3-byte length 1, request);
// a piece of a longer message is never mistaken for one.
bool is_key_update(const unsigned char* data, std::size_t size) {
    return size == 5 && data[0] == key_update_message && data[1] == 0 && data[2] == 0 && data[3] == 1;
}

// HKDF-Expand-Label(secret, label, "", size) of RFC 8446 7.1, with the suite's
// hash, which the secret's length names (SHA-256 for AES-128-GCM, SHA-384 for AES-256-GCM).
bool expand_label(const unsigned char* secret, std::size_t secret_size, const char* label, unsigned char* out,
                  std::size_t size) {
    const char* digest = secret_size == 32 ? "SHA256" : secret_size == 48 ? "SHA384" : nullptr;
    if (!digest) return false;
    unsigned char info[2 + 1 + 255 + 1];
    const std::size_t label_size = 6 + std::strlen(label);
    info[0] = static_cast<unsigned char>(size >> 8);
    info[1] = static_cast<unsigned char>(size);
    info[2] = static_cast<unsigned char>(label_size);
    std::memcpy(info + 3, "tls13 ", 6);
    std::memcpy(info + 9, label, label_size - 6);
    info[3 + label_size] = 0;  // no context
    auto* kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
    auto* ctx = kdf ? EVP_KDF_CTX_new(kdf) : nullptr;
    EVP_KDF_free(kdf);
    if (!ctx) return false;
    int mode = EVP_KDF_HKDF_MODE_EXPAND_ONLY;
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_int(OSSL_KDF_PARAM_MODE, &mode),
        OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, const_cast<char*>(digest), 0),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<unsigned char*>(secret), secret_size),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info, 4 + label_size), OSSL_PARAM_construct_end()};
    const bool derived = EVP_KDF_derive(ctx, out, size, params) == 1;
    EVP_KDF_CTX_free(ctx);
    return derived;
}

}  // namespace

TlsRecordSealer::~TlsRecordSealer() { stop(); }  // EVP_CIPHER_CTX_free clears the key schedule

void TlsRecordSealer::stop() {
    EVP_CIPHER_CTX_free(cipher_);
    cipher_ = nullptr;
    OPENSSL_cleanse(iv_, sizeof iv_);
    spent_ = awaiting_key_ = false;
}

bool TlsRecordSealer::start(const void* crypto_info) {
    stop();
    tls_crypto_info head;
    std::memcpy(&head, crypto_info, sizeof head);
    if (head.version != TLS_1_3_VERSION) return false;
    auto* ctx = EVP_CIPHER_CTX_new();
    if (!ctx) return false;
    bool loaded = false;
    if (head.cipher_type == TLS_CIPHER_AES_GCM_128) {
        tls12_crypto_info_aes_gcm_128 info;
        std::memcpy(&info, crypto_info, sizeof info);
        loaded = load(ctx, EVP_aes_128_gcm(), info, iv_, sequence_);
        key_bytes_ = sizeof info.key;
        OPENSSL_cleanse(&info, sizeof info);
    } else if (head.cipher_type == TLS_CIPHER_AES_GCM_256) {
        tls12_crypto_info_aes_gcm_256 info;
        std::memcpy(&info, crypto_info, sizeof info);
        loaded = load(ctx, EVP_aes_256_gcm(), info, iv_, sequence_);
        key_bytes_ = sizeof info.key;
        OPENSSL_cleanse(&info, sizeof info);
    }
    if (!loaded) {
        EVP_CIPHER_CTX_free(ctx);
        stop();
        return false;
    }
    cipher_ = ctx;
    return true;
}

bool TlsRecordSealer::seal(std::uint8_t type, const unsigned char* data, std::size_t size, SendBuffer& out) {
    if (!cipher_ || spent_ || awaiting_key_) return false;
    if (size == 0) return true;  // an empty write is no record
    for (std::size_t at = 0; at < size; at += max_plaintext)
        if (!seal_record(type, data + at, std::min(max_plaintext, size - at), out)) return false;
    // The KeyUpdate itself goes under the old key; what follows waits for the new one.
    if (type == handshake && is_key_update(data, size)) awaiting_key_ = true;
    return true;
}

bool TlsRecordSealer::rekey(const unsigned char* secret, std::size_t size) {
    if (!cipher_ || spent_) return false;
    if (!awaiting_key_) {
        spent_ = true;  // OpenSSL changed keys without a KeyUpdate seen here: seal nothing more
        return false;
    }
    unsigned char key[32], iv[12];
    const bool derived = expand_label(secret, size, "key", key, key_bytes_) &&
                         expand_label(secret, size, "iv", iv, sizeof iv) &&
                         EVP_EncryptInit_ex(cipher_, nullptr, nullptr, key, nullptr) == 1;
    OPENSSL_cleanse(key, sizeof key);
    if (!derived) {
        OPENSSL_cleanse(iv, sizeof iv);
        spent_ = true;
        return false;
    }
    std::memcpy(iv_, iv, sizeof iv_);
    OPENSSL_cleanse(iv, sizeof iv);
    sequence_ = 0;
    awaiting_key_ = false;
    return true;
}

// RFC 8446 5.2: the header is the additional data; the inner plaintext is the
// content and its type; the nonce is the IV with the sequence number XORed
// into its last 8 bytes.
bool TlsRecordSealer::seal_record(std::uint8_t type, const unsigned char* data, std::size_t size, SendBuffer& out) {
    if (sequence_ >= max_records) {
        spent_ = true;
        return false;
    }
    const auto length = size + 1 + tag_bytes;
    auto* record = reinterpret_cast<unsigned char*>(out.grow(5 + length));
    record[0] = application_data;
    record[1] = 3;
    record[2] = 3;
    record[3] = static_cast<unsigned char>(length >> 8);
    record[4] = static_cast<unsigned char>(length);
    unsigned char nonce[12];
    std::memcpy(nonce, iv_, sizeof nonce);
    for (int i = 0; i < 8; ++i) nonce[4 + i] ^= static_cast<unsigned char>(sequence_ >> (56 - 8 * i));
    // Every output length is checked: a byte the cipher did not write must never be sent.
    int n = 0, aad = 0, content = 0, inner_type = 0;
    auto* body = record + 5;
    const bool sealed = EVP_EncryptInit_ex(cipher_, nullptr, nullptr, nullptr, nonce) == 1 &&
                        EVP_EncryptUpdate(cipher_, nullptr, &aad, record, 5) == 1 &&
                        EVP_EncryptUpdate(cipher_, body, &content, data, static_cast<int>(size)) == 1 &&
                        static_cast<std::size_t>(content) == size &&
                        EVP_EncryptUpdate(cipher_, body + size, &inner_type, &type, 1) == 1 && inner_type == 1 &&
                        EVP_EncryptFinal_ex(cipher_, body + size + 1, &n) == 1 && n == 0 &&
                        EVP_CIPHER_CTX_ctrl(cipher_, EVP_CTRL_GCM_GET_TAG, tag_bytes, body + size + 1) == 1;
    if (!sealed) {
        out.shrink(5 + length);  // never send what it left there
        spent_ = true;
        return false;
    }
    ++sequence_;
    return true;
}

}  // namespace berth::http
