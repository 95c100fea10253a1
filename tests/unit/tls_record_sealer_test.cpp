#include <linux/tls.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "http/tls_record_sealer.hpp"

using berth::http::SendBuffer;
using berth::http::TlsRecordSealer;

namespace {

struct Keys {
    std::vector<unsigned char> key, iv;  // iv: salt then the 8 bytes OpenSSL puts in iv
    std::uint64_t sequence = 0;
};

// The keys as OpenSSL hands them to the kernel: salt, then the rest of the IV; the sequence big-endian.
template <typename Info = tls12_crypto_info_aes_gcm_128>
Info info_of(const Keys& k, unsigned short version = TLS_1_3_VERSION,
             unsigned short cipher = std::is_same_v<Info, tls12_crypto_info_aes_gcm_128> ? TLS_CIPHER_AES_GCM_128
                                                                                         : TLS_CIPHER_AES_GCM_256) {
    Info info{};
    info.info.version = version;
    info.info.cipher_type = cipher;
    std::memcpy(info.salt, k.iv.data(), 4);
    std::memcpy(info.iv, k.iv.data() + 4, 8);
    std::memcpy(info.key, k.key.data(), sizeof info.key);
    for (int i = 0; i < 8; ++i) info.rec_seq[i] = static_cast<unsigned char>(k.sequence >> (56 - 8 * i));
    return info;
}

Keys keys(std::size_t key_bytes, unsigned char seed, std::uint64_t sequence = 0) {
    Keys k;
    for (std::size_t i = 0; i < key_bytes; ++i) k.key.push_back(static_cast<unsigned char>(seed + i));
    for (std::size_t i = 0; i < 12; ++i) k.iv.push_back(static_cast<unsigned char>(seed * 3 + i));
    k.sequence = sequence;
    return k;
}

struct Opened {
    unsigned char type;
    std::string content;
};

// Opens one TLS 1.3 record at `at` with OpenSSL's AES-GCM directly (not the sealer's code):
// checks the header and the tag; advances `at`.
Opened open_record(const SendBuffer& out, std::size_t& at, const Keys& k, std::uint64_t sequence) {
    const auto* record = reinterpret_cast<const unsigned char*>(out.data()) + at;
    REQUIRE(out.size() - at >= 5 + 17);
    CHECK(record[0] == 23);  // every TLS 1.3 record is application data outside
    CHECK(record[1] == 3);
    CHECK(record[2] == 3);
    const std::size_t length = std::size_t{record[3]} << 8 | record[4];
    REQUIRE(out.size() - at >= 5 + length);
    unsigned char nonce[12];
    std::memcpy(nonce, k.iv.data(), 12);
    for (int i = 0; i < 8; ++i) nonce[4 + i] ^= static_cast<unsigned char>(sequence >> (56 - 8 * i));
    auto* ctx = EVP_CIPHER_CTX_new();
    std::vector<unsigned char> plain(length);
    int n = 0, total = 0;
    REQUIRE(EVP_DecryptInit_ex(ctx, k.key.size() == 16 ? EVP_aes_128_gcm() : EVP_aes_256_gcm(), nullptr, k.key.data(),
                               nonce) == 1);
    REQUIRE(EVP_DecryptUpdate(ctx, nullptr, &n, record, 5) == 1);
    REQUIRE(EVP_DecryptUpdate(ctx, plain.data(), &n, record + 5, static_cast<int>(length - 16)) == 1);
    total = n;
    REQUIRE(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, 16, const_cast<unsigned char*>(record + 5 + length - 16)) ==
            1);
    const bool authentic = EVP_DecryptFinal_ex(ctx, plain.data() + total, &n) == 1;
    EVP_CIPHER_CTX_free(ctx);
    REQUIRE(authentic);
    at += 5 + length;
    REQUIRE(total >= 1);
    return {plain[static_cast<std::size_t>(total) - 1],
            std::string(reinterpret_cast<char*>(plain.data()), static_cast<std::size_t>(total) - 1)};
}

const unsigned char* bytes(const std::string& s) { return reinterpret_cast<const unsigned char*>(s.data()); }

}  // namespace

TEST_CASE("sealed TLS 1.3 records open with the keys OpenSSL would hand the kernel") {
    const auto k = keys(16, 7, 41);
    auto info = info_of(k);
    TlsRecordSealer sealer;
    REQUIRE(sealer.start(&info));
    CHECK(sealer.active());
    SendBuffer out;
    REQUIRE(sealer.seal(23, bytes("hello"), 5, out));
    CHECK(out.size() == 5 + 5 + TlsRecordSealer::overhead - 5);
    std::string big(40000, 'x');
    for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131);
    REQUIRE(sealer.seal(23, bytes(big), big.size(), out));
    REQUIRE(sealer.seal(21, bytes(std::string("\x01\x00", 2)), 2, out));  // an alert: its type inside

    std::size_t at = 0;
    auto first = open_record(out, at, k, 41);
    CHECK(first.type == 23);
    CHECK(first.content == "hello");
    std::string joined;
    for (std::uint64_t seq = 42; seq < 45; ++seq) {  // 16384 + 16384 + 7232: one record each
        auto r = open_record(out, at, k, seq);
        CHECK(r.type == 23);
        CHECK(r.content.size() <= TlsRecordSealer::max_plaintext);
        joined += r.content;
    }
    CHECK(joined == big);
    auto alert = open_record(out, at, k, 45);
    CHECK(alert.type == 21);
    CHECK(alert.content == std::string("\x01\x00", 2));
    CHECK(at == out.size());
}

TEST_CASE("a record opened with the wrong sequence number fails its tag") {
    const auto k = keys(16, 9);
    auto info = info_of(k);
    TlsRecordSealer sealer;
    REQUIRE(sealer.start(&info));
    SendBuffer out;
    REQUIRE(sealer.seal(23, bytes("abc"), 3, out));
    // Opened as the second record: the nonce differs, so OpenSSL must refuse it.
    const auto* record = reinterpret_cast<const unsigned char*>(out.data());
    unsigned char nonce[12];
    std::memcpy(nonce, k.iv.data(), 12);
    nonce[11] ^= 1;
    auto* ctx = EVP_CIPHER_CTX_new();
    unsigned char plain[8];
    int n = 0;
    REQUIRE(EVP_DecryptInit_ex(ctx, EVP_aes_128_gcm(), nullptr, k.key.data(), nonce) == 1);
    REQUIRE(EVP_DecryptUpdate(ctx, nullptr, &n, record, 5) == 1);
    REQUIRE(EVP_DecryptUpdate(ctx, plain, &n, record + 5, 4) == 1);
    REQUIRE(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, 16, const_cast<unsigned char*>(record + 9)) == 1);
    CHECK(EVP_DecryptFinal_ex(ctx, plain + n, &n) != 1);
    EVP_CIPHER_CTX_free(ctx);
}

TEST_CASE("AES-256-GCM keys seal too") {
    const auto k = keys(32, 3, 0);
    auto info = info_of<tls12_crypto_info_aes_gcm_256>(k);
    TlsRecordSealer sealer;
    REQUIRE(sealer.start(&info));
    SendBuffer out;
    REQUIRE(sealer.seal(22, bytes("ticket"), 6, out));
    std::size_t at = 0;
    auto r = open_record(out, at, k, 0);
    CHECK(r.type == 22);
    CHECK(r.content == "ticket");
}

TEST_CASE("what is not TLS 1.3 with AES-GCM is left to OpenSSL") {
    const auto k = keys(16, 1);
    TlsRecordSealer sealer;
    auto tls12 = info_of(k, TLS_1_2_VERSION);
    CHECK_FALSE(sealer.start(&tls12));
    CHECK_FALSE(sealer.active());
    tls12_crypto_info_chacha20_poly1305 chacha{};
    chacha.info.version = TLS_1_3_VERSION;
    chacha.info.cipher_type = TLS_CIPHER_CHACHA20_POLY1305;
    CHECK_FALSE(sealer.start(&chacha));
    SendBuffer out;
    CHECK_FALSE(sealer.seal(23, bytes("x"), 1, out));
    CHECK(out.empty());
    // Keys that replace others are refused the same way: the old ones are dropped, not kept.
    auto good = info_of(k);
    REQUIRE(sealer.start(&good));
    CHECK_FALSE(sealer.start(&tls12));
    CHECK_FALSE(sealer.active());
}

TEST_CASE("after a KeyUpdate only the next secret seals, from sequence 0") {
    const auto k = keys(16, 5, 10);
    auto info = info_of(k);
    TlsRecordSealer sealer;
    REQUIRE(sealer.start(&info));
    SendBuffer out;
    REQUIRE(sealer.seal(23, bytes("before"), 6, out));
    // A handshake write that only starts like one (a piece of a long message) is no KeyUpdate.
    const std::string piece("\x18\x00\x00\x01\x01\x00", 6);
    REQUIRE(sealer.seal(22, bytes(piece), piece.size(), out));
    const std::string key_update("\x18\x00\x00\x01\x01", 5);
    REQUIRE(sealer.seal(22, bytes(key_update), key_update.size(), out));
    const auto sealed = out.size();
    CHECK_FALSE(sealer.seal(23, bytes("early"), 5, out));  // the new key has not come
    CHECK(out.size() == sealed);

    // The next secret, and its key and IV by RFC 8446 7.1 computed here with OpenSSL's TLS13-KDF.
    unsigned char secret[32];
    for (int i = 0; i < 32; ++i) secret[i] = static_cast<unsigned char>(200 - i);
    auto expand = [&](const char* label, std::size_t size) {
        std::vector<unsigned char> out_bytes(size);
        auto* kdf = EVP_KDF_fetch(nullptr, "TLS13-KDF", nullptr);
        auto* ctx = EVP_KDF_CTX_new(kdf);
        int mode = EVP_KDF_HKDF_MODE_EXPAND_ONLY;
        OSSL_PARAM params[] = {OSSL_PARAM_construct_int("mode", &mode),
                               OSSL_PARAM_construct_utf8_string("digest", const_cast<char*>("SHA256"), 0),
                               OSSL_PARAM_construct_octet_string("key", secret, sizeof secret),
                               OSSL_PARAM_construct_octet_string("prefix", const_cast<char*>("tls13 "), 6),
                               OSSL_PARAM_construct_octet_string("label", const_cast<char*>(label), std::strlen(label)),
                               OSSL_PARAM_construct_end()};
        REQUIRE(EVP_KDF_derive(ctx, out_bytes.data(), size, params) == 1);
        EVP_KDF_CTX_free(ctx);
        EVP_KDF_free(kdf);
        return out_bytes;
    };
    Keys next{expand("key", 16), expand("iv", 12), 0};
    REQUIRE(sealer.rekey(secret, sizeof secret));
    REQUIRE(sealer.seal(23, bytes("after"), 5, out));

    std::size_t at = 0;
    CHECK(open_record(out, at, k, 10).content == "before");
    CHECK(open_record(out, at, k, 11).content == piece);
    auto update = open_record(out, at, k, 12);  // the KeyUpdate itself, under the old key
    CHECK(update.type == 22);
    CHECK(update.content == key_update);
    CHECK(open_record(out, at, next, 0).content == "after");
    CHECK(at == out.size());
}

TEST_CASE("a key that has sealed its limit of records seals no more") {
    const auto k = keys(16, 2, TlsRecordSealer::max_records - 1);
    auto info = info_of(k);
    TlsRecordSealer sealer;
    REQUIRE(sealer.start(&info));
    SendBuffer out;
    REQUIRE(sealer.seal(23, bytes("last"), 4, out));
    const auto sealed = out.size();
    CHECK_FALSE(sealer.seal(23, bytes("one more"), 8, out));
    CHECK(out.size() == sealed);
}

TEST_CASE("a new secret without a KeyUpdate seen stops the sealing") {
    const auto k = keys(16, 4);
    auto info = info_of(k);
    TlsRecordSealer sealer;
    REQUIRE(sealer.start(&info));
    SendBuffer out;
    CHECK_FALSE(sealer.rekey(reinterpret_cast<const unsigned char*>("01234567890123456789012345678901"), 32));
    CHECK_FALSE(sealer.seal(23, bytes("x"), 1, out));
    CHECK(out.empty());
}
