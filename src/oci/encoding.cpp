#include "berth/oci/encoding.hpp"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <stdexcept>

namespace berth::oci {
namespace {

constexpr char hex_digits[] = "0123456789abcdef";
constexpr char base64_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr char base64url_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

std::string encode64(std::string_view bytes, const char* alphabet, bool pad) {
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    unsigned buffer = 0;
    int bits = 0;
    for (unsigned char c : bytes) {
        buffer = (buffer << 8) | c;
        bits += 8;
        while (bits >= 6) {
            bits -= 6;
            out += alphabet[(buffer >> bits) & 63];
        }
    }
    if (bits > 0) out += alphabet[(buffer << (6 - bits)) & 63];
    if (pad)
        while (out.size() % 4) out += '=';
    return out;
}

std::optional<std::string> decode64(std::string_view text, const char* alphabet) {
    while (!text.empty() && text.back() == '=') text.remove_suffix(1);
    if (text.size() % 4 == 1) return std::nullopt;
    const std::string_view letters(alphabet, 64);
    std::string out;
    out.reserve(text.size() * 3 / 4);
    unsigned buffer = 0;
    int bits = 0;
    for (char c : text) {
        auto v = letters.find(c);
        if (v == std::string_view::npos) return std::nullopt;
        buffer = (buffer << 6) | static_cast<unsigned>(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out += static_cast<char>((buffer >> bits) & 0xff);
        }
    }
    return out;
}

}  // namespace

std::string hex(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size() * 2);
    for (unsigned char c : bytes) {
        out += hex_digits[c >> 4];
        out += hex_digits[c & 15];
    }
    return out;
}

std::optional<std::string> unhex(std::string_view text) {
    if (text.size() % 2) return std::nullopt;
    std::string out;
    out.reserve(text.size() / 2);
    for (std::size_t i = 0; i < text.size(); i += 2) {
        int high = hex_value(text[i]), low = hex_value(text[i + 1]);
        if (high < 0 || low < 0) return std::nullopt;
        out += static_cast<char>(high << 4 | low);
    }
    return out;
}

std::string base64(std::string_view bytes) { return encode64(bytes, base64_alphabet, true); }
std::string base64url(std::string_view bytes) { return encode64(bytes, base64url_alphabet, false); }
std::optional<std::string> base64_decode(std::string_view text) { return decode64(text, base64_alphabet); }
std::optional<std::string> base64url_decode(std::string_view text) { return decode64(text, base64url_alphabet); }

std::string random_bytes(std::size_t count) {
    std::string out(count, '\0');
    if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(count)) != 1)
        throw std::runtime_error("OpenSSL's random generator failed");
    return out;
}

bool equal_secrets(std::string_view presented, std::string_view expected) {
    return presented.size() == expected.size() &&
           CRYPTO_memcmp(presented.data(), expected.data(), expected.size()) == 0;
}

}  // namespace berth::oci
