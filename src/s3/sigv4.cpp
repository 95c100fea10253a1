// AWS Signature Version 4 for S3 (sigv4.hpp).
#include "berth/s3/sigv4.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <stdexcept>

#include "berth/oci/digest.hpp"
#include "berth/oci/encoding.hpp"

namespace berth::s3 {
namespace {

constexpr std::string_view algorithm = "AWS4-HMAC-SHA256";

std::string hmac(std::string_view key, std::string_view data) {
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
              reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac, &length))
        throw std::runtime_error("HMAC-SHA256 failed");
    return {reinterpret_cast<const char*>(mac), length};
}

std::string sha256_hex(std::string_view data) { return oci::Digest::of(oci::DigestAlgorithm::sha256, data).hex(); }

bool unreserved(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
           c == '_' || c == '~';
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// Leading and trailing whitespace dropped, every run inside made one space: a folded or padded
// value signs the same as its plain form (the suite's get-header-value-trim and -multiline).
std::string trimmed(std::string_view value) {
    std::string out;
    bool pending_space = false;
    for (char c : value) {
        if (is_space(c)) {
            pending_space = !out.empty();
            continue;
        }
        if (pending_space) out += ' ';
        pending_space = false;
        out += c;
    }
    return out;
}

std::string lower(std::string_view text) {
    std::string out(text);
    std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
    return out;
}

struct CanonicalHeaders {
    std::string lines;         // "name:value\n" each, sorted by name
    std::string signed_names;  // "host;x-amz-date"
};

// Repeated headers are one line, their values joined by ',' in the order sent.
CanonicalHeaders canonical_headers(const net::Headers& headers) {
    std::map<std::string, std::string> by_name;
    for (const auto& [name, value] : headers) {
        auto [entry, fresh] = by_name.try_emplace(lower(name), trimmed(value));
        if (!fresh) entry->second += "," + trimmed(value);
    }
    CanonicalHeaders canonical;
    for (const auto& [name, value] : by_name) {
        canonical.lines += name + ":" + value + "\n";
        if (!canonical.signed_names.empty()) canonical.signed_names += ';';
        canonical.signed_names += name;
    }
    return canonical;
}

bool is_sha256_hex(std::string_view text) {
    return text.size() == 64 && std::all_of(text.begin(), text.end(),
                                            [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

const std::string& checked_payload_hash(const RequestToSign& request) {
    if (request.payload_hash != unsigned_payload && !is_sha256_hex(request.payload_hash))
        throw std::invalid_argument("S3 signing: the payload hash must be hex SHA-256 or UNSIGNED-PAYLOAD, not \"" +
                                    request.payload_hash + "\"");
    return request.payload_hash;
}

std::string date_of(const RequestToSign& request) { return amz_date(request.time).substr(0, 8); }

}  // namespace

std::string uri_encode(std::string_view bytes, bool keep_slash) {
    static constexpr char digits[] = "0123456789ABCDEF";
    std::string out;
    out.reserve(bytes.size());
    for (unsigned char c : bytes) {
        if (unreserved(c) || (keep_slash && c == '/')) {
            out += static_cast<char>(c);
        } else {
            out += '%';
            out += digits[c >> 4];
            out += digits[c & 15];
        }
    }
    return out;
}

std::string canonical_query(const Query& query) {
    std::vector<std::pair<std::string, std::string>> encoded;
    encoded.reserve(query.size());
    for (const auto& [name, value] : query) encoded.emplace_back(uri_encode(name, false), uri_encode(value, false));
    std::sort(encoded.begin(), encoded.end());
    std::string out;
    for (const auto& [name, value] : encoded) {
        if (!out.empty()) out += '&';
        out += name + "=" + value;
    }
    return out;
}

std::string amz_date(std::chrono::system_clock::time_point time) {
    using namespace std::chrono;
    const auto seconds = floor<std::chrono::seconds>(time);
    const auto day = floor<days>(seconds);
    const year_month_day date{day};
    const hh_mm_ss clock{seconds - day};
    char text[32];
    std::snprintf(text, sizeof text, "%04d%02u%02uT%02d%02d%02dZ", static_cast<int>(date.year()),
                  static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()),
                  static_cast<int>(clock.hours().count()), static_cast<int>(clock.minutes().count()),
                  static_cast<int>(clock.seconds().count()));
    return text;
}

std::string canonical_request(const RequestToSign& request) {
    const auto headers = canonical_headers(request.headers);
    return request.method + "\n" + encode_path(request.path) + "\n" + canonical_query(request.query) + "\n" +
           headers.lines + "\n" + headers.signed_names + "\n" + checked_payload_hash(request);
}

std::string credential_scope(const RequestToSign& request) {
    return date_of(request) + "/" + request.region + "/" + request.service + "/aws4_request";
}

std::string string_to_sign(const RequestToSign& request) {
    return std::string(algorithm) + "\n" + amz_date(request.time) + "\n" + credential_scope(request) + "\n" +
           sha256_hex(canonical_request(request));
}

std::string signing_key(std::string_view secret, std::string_view date, std::string_view region,
                        std::string_view service) {
    const auto dated = hmac("AWS4" + std::string(secret), date);
    return hmac(hmac(hmac(dated, region), service), "aws4_request");
}

std::string signature(const RequestToSign& request) {
    const auto key = signing_key(request.credentials.secret_key, date_of(request), request.region, request.service);
    return oci::hex(hmac(key, string_to_sign(request)));
}

std::string authorization(const RequestToSign& request) {
    return std::string(algorithm) + " Credential=" + request.credentials.access_key + "/" + credential_scope(request) +
           ", SignedHeaders=" + canonical_headers(request.headers).signed_names + ", Signature=" + signature(request);
}

std::string presigned_query(const RequestToSign& request, std::chrono::seconds expires) {
    if (expires < std::chrono::seconds(1) || expires > std::chrono::hours(24 * 7))
        throw std::invalid_argument("a presigned URL expires after 1 second to 7 days");
    RequestToSign presigned = request;
    presigned.query.emplace_back("X-Amz-Algorithm", algorithm);
    presigned.query.emplace_back("X-Amz-Credential", request.credentials.access_key + "/" + credential_scope(request));
    presigned.query.emplace_back("X-Amz-Date", amz_date(request.time));
    presigned.query.emplace_back("X-Amz-Expires", std::to_string(expires.count()));
    presigned.query.emplace_back("X-Amz-SignedHeaders", canonical_headers(request.headers).signed_names);
    return canonical_query(presigned.query) + "&X-Amz-Signature=" + signature(presigned);
}

}  // namespace berth::s3
