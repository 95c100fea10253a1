#pragma once
// Seals TLS 1.3 records in berth's own code, with the send keys OpenSSL hands
// a BIO that says it can do kernel TLS (the kernel's tls12_crypto_info_*
// layout, linux/tls.h). Where the kernel has no TLS, OpenSSL's record layer
// copies the plaintext into its own buffer, encrypts it there, and the stream
// copied each record out again; here a record is encrypted from the caller's
// bytes straight into the send buffer, so the cipher's pass is the only one.
// TLS 1.3 with AES-GCM only: anything else is refused and stays with OpenSSL.
#include <openssl/evp.h>

#include <cstddef>
#include <cstdint>

#include "send_buffer.hpp"

namespace berth::http {

class TlsRecordSealer {
public:
    // Plaintext per record: TLS's limit, and what OpenSSL writes at most.
    static constexpr std::size_t max_plaintext = 16384;
    // What a record adds to its plaintext: header, inner content type, tag.
    static constexpr std::size_t overhead = 5 + 1 + 16;
    // Records one key may seal: RFC 8446 5.5 keeps AES-GCM under 2^24.5 full
    // records. OpenSSL 3.0 never updates its send key by itself, so a
    // connection that reaches this many ends, and its client opens another.
    static constexpr std::uint64_t max_records = std::uint64_t{1} << 24;

    TlsRecordSealer() = default;
    ~TlsRecordSealer();
    TlsRecordSealer(const TlsRecordSealer&) = delete;
    TlsRecordSealer& operator=(const TlsRecordSealer&) = delete;

    // Takes a connection's send keys; false (and nothing kept) for what is
    // not sealed here.
    bool start(const void* crypto_info);
    bool active() const { return cipher_ != nullptr; }

    // Appends `size` bytes of plaintext as records of the given content type
    // (23 application data, 21 alert, 22 handshake). False when the records
    // may not be sealed with this key: the limit above, or after a KeyUpdate
    // until its new secret has come (rekey). The connection must end then.
    bool seal(std::uint8_t type, const unsigned char* data, std::size_t size, SendBuffer& out);

    // The next send secret after a KeyUpdate (RFC 8446 7.2), which OpenSSL
    // announces only to its key log: derives the key and IV and starts the
    // sequence again. False (and nothing sealed from then on) if none was due
    // or it cannot be used.
    bool rekey(const unsigned char* secret, std::size_t size);

private:
    bool seal_record(std::uint8_t type, const unsigned char* data, std::size_t size, SendBuffer& out);
    void stop();

    EVP_CIPHER_CTX* cipher_ = nullptr;
    unsigned char iv_[12] = {};
    std::uint64_t sequence_ = 0;
    std::size_t key_bytes_ = 0;
    bool spent_ = false;
    bool awaiting_key_ = false;  // a KeyUpdate went out under the old key
};

}  // namespace berth::http
