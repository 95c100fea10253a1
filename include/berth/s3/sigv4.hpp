#pragma once
// AWS Signature Version 4 as S3 checks it: pure functions of one request, so the published
// vectors test them (tests/unit/sigv4_test.cpp).
//
// The path rule is S3's: the decoded path is URI-encoded once, segment by segment, and never
// normalized ("//", "." and ".." stay, since they are part of an object's key). The same encoded
// path goes on the wire (encode_path), so what is signed is what is sent. AWS's generic suite
// encodes an already-encoded path a second time for other services; berth only ever signs for
// S3 and never hands the signer an encoded path, so the suite's unnormalized vectors, whose
// paths are raw, come out the same.
#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "berth/net/client.hpp"

namespace berth::s3 {

// The payload hash of a request whose body is not hashed (a presigned URL's).
// Streaming payloads (STREAMING-*) are refused: Ceph 16 does not take the trailer variant, and
// every body berth sends is whole in memory, so it is hashed.
inline constexpr std::string_view unsigned_payload = "UNSIGNED-PAYLOAD";
inline constexpr std::string_view empty_payload_sha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

// Decoded names and values, in any order; an empty value is a bare sub-resource ("?uploads").
using Query = std::vector<std::pair<std::string, std::string>>;

struct Credentials {
    std::string access_key, secret_key;
};

struct RequestToSign {
    std::string method;
    std::string path;      // decoded, from the leading '/': "/bucket/a key"
    Query query;           // the request's own parameters, never the X-Amz-* of a presigned URL
    net::Headers headers;  // every header signed, Host among them, as sent; names in any case
    // Lower-case hex SHA-256 of the body, or unsigned_payload; anything else is std::invalid_argument.
    std::string payload_hash;
    std::chrono::system_clock::time_point time;
    std::string region;
    std::string service = "s3";
    Credentials credentials;
};

// RFC 3986 percent-encoding of every byte but A-Z a-z 0-9 - . _ ~ (and '/' when keep_slash), with
// upper-case hex: S3's UriEncode.
std::string uri_encode(std::string_view bytes, bool keep_slash);
inline std::string encode_path(std::string_view path) { return uri_encode(path, true); }
// Names and values encoded, sorted by name then value, "name=value" joined by '&' (an empty
// value still gets its '='). Also fit to send as the request's query.
std::string canonical_query(const Query& query);
// "20130524T000000Z", UTC.
std::string amz_date(std::chrono::system_clock::time_point time);

std::string canonical_request(const RequestToSign& request);
std::string credential_scope(const RequestToSign& request);  // "20130524/us-east-1/s3/aws4_request"
std::string string_to_sign(const RequestToSign& request);
// The raw 32 bytes of HMAC("AWS4" + secret, date) chained through region, service, "aws4_request".
std::string signing_key(std::string_view secret, std::string_view date, std::string_view region,
                        std::string_view service);
std::string signature(const RequestToSign& request);  // lower-case hex
// The Authorization header's value: "AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...".
std::string authorization(const RequestToSign& request);

// The query of a presigned URL: the request's query and X-Amz-Algorithm, -Credential, -Date,
// -Expires and -SignedHeaders (of the request's headers, usually Host alone), canonical and
// encoded, then X-Amz-Signature. `expires` is 1 s to 7 days (S3's bounds), else std::invalid_argument.
std::string presigned_query(const RequestToSign& request, std::chrono::seconds expires);

}  // namespace berth::s3
