#pragma once
// The S3 client of the S3 blob store (Ceph radosgw, or anything that speaks S3): objects,
// ranged reads streamed to a sink, multipart uploads, listings and presigned URLs, over berth's
// one HTTP client (net::Client) and signed with SigV4 (sigv4.hpp). Every body sent is whole in
// memory, hashed and signed (x-amz-content-sha256), never streamed with a trailer.
//
// Blocking, for worker threads (never a net::Client I/O thread), and safe to call from many at
// once; each call that waits on S3 calls net::reach(s3_party) first. A key is 1 to 1024 bytes
// (std::invalid_argument otherwise), sent and signed URI-encoded once, '/' kept. Every failure
// is an s3::Error (types.hpp), with S3's status and code and whether to try again. Nothing is
// retried here, but a request whose pooled connection turns out closed before any answer goes
// once more on another.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "berth/net/client.hpp"
#include "berth/s3/sigv4.hpp"
#include "berth/s3/types.hpp"

namespace berth::s3 {

// The party S3's requests wait on (net/reach.hpp).
inline const std::string s3_party = "s3";

struct Config {
    std::string endpoint;  // "http://host[:port][/prefix]" or "https://..."
    std::string bucket;    // S3's rules: 3..63 of a-z 0-9 . -
    std::string region = "us-east-1";
    std::string access_key, secret_key;
    std::string ca_file;  // PEM; empty: the system's
    // true: <endpoint>/<bucket>/<key>, radosgw's default, for any endpoint. false (virtual-host
    // style): <bucket>.<endpoint host>/<key>, which needs that name in DNS and the certificate.
    bool path_style = true;
    // Multipart uploads' part size, for the store that splits blobs: 5 MiB (S3's least, but for
    // the last part) to 5 GiB.
    std::uint64_t part_size = 16 << 20;
    // From a request's last byte to the answer's head: S3 answers a PUT once it has stored it.
    // Connecting and each read of a body are bounded by the net::Client's own options.
    std::chrono::milliseconds answer_timeout{30000};
};

class Client {
public:
    // Throws std::invalid_argument naming the setting that is wrong.
    Client(Config config, net::Client& http);

    // nullopt when there is no such object (or no such bucket: a HEAD's answer has no body to tell).
    std::optional<ObjectInfo> head(const std::string& key);
    void put(const std::string& key, std::span<const char> data);

    using Sink = std::function<void(const char* data, std::size_t size)>;
    // Bytes [offset, offset + length) of the object, handed to `sink` as they come; returns how
    // many, fewer than `length` only where the object ends (0 from its end on). A length past
    // the end of any object (UINT64_MAX) reads to the end. The answer is checked against the
    // range asked (206 and its Content-Range, or 200 with the whole object) and its length.
    // An exception from the sink ends the read and goes to the caller as it is.
    std::uint64_t get(const std::string& key, std::uint64_t offset, std::uint64_t length, const Sink& sink);
    // A server-side copy of an object (CopyObject); onto itself, it is renewed (a new
    // Last-Modified, which garbage collection's grace counts from).
    void copy(const std::string& from, const std::string& to);
    // A missing key is no error (S3 answers 204 for it anyway).
    void remove(const std::string& key);
    // ListObjectsV2 of the keys under `prefix`, from `continuation` (a page's next token, or "").
    ObjectPage list(const std::string& prefix, const std::string& continuation = {}, int max_keys = 1000);

    // Multipart uploads: create one, upload its parts (any order, numbers 1..10000, each at
    // least 5 MiB but the last), then complete it with the parts in ascending order, or abort it.
    std::string create_multipart(const std::string& key);  // the upload id
    std::string upload_part(const std::string& key, const std::string& upload_id, int number,
                            std::span<const char> data);  // the part's ETag
    // Checks the answer for an <Error> (S3 may send one with a 200) but reads nothing else of
    // it: Ceph 16 leaves its ETag empty.
    void complete_multipart(const std::string& key, const std::string& upload_id, const std::vector<Part>& parts);
    // An upload already gone (NoSuchUpload) is no error.
    void abort_multipart(const std::string& key, const std::string& upload_id);
    // The uploads begun under `prefix` and neither completed nor aborted, after `after`.
    UploadPage list_multipart_uploads(const std::string& prefix, const UploadMarkers& after = {});

    // A URL anyone may GET the object with until `expires` (1 s to 7 days) from now; no request.
    std::string presign_get(const std::string& key, std::chrono::seconds expires) const;

    const Config& config() const { return config_; }

private:
    struct Opened {
        std::unique_ptr<net::Exchange> exchange;
        const net::ResponseHead* head = nullptr;
    };

    std::string object_path(const std::string& key) const;
    std::string bucket_path() const;
    RequestToSign to_sign(const std::string& method, const std::string& path, const Query& query,
                          std::string payload_hash, net::Headers headers) const;
    net::RequestHead signed_head(const std::string& method, const std::string& path, const Query& query,
                                 std::string payload_hash, const net::Headers& headers = {}) const;
    // A whole exchange whose answer is small (a head, XML), at most 1 MiB.
    net::Response exchange(const std::string& method, const std::string& path, const Query& query,
                           const std::string& body = {}, const net::Headers& headers = {});
    // Throws unless the answer is a 200 with no <Error> in it.
    void require_done(const net::Response& answer, const std::string& what);
    // A request with its body from memory, up to the answer's head.
    Opened send(net::RequestHead head, std::span<const char> body, const std::string& what);
    std::uint64_t deliver(Opened& opened, const std::string& path, std::uint64_t offset, std::uint64_t length,
                          const Sink& sink);

    Config config_;
    net::Client& http_;
    net::Origin origin_;
    std::string scheme_;     // "http" or "https"
    std::string host_;       // the Host header, as signed: host[:port], the port only when not the scheme's
    std::string base_path_;  // the endpoint's prefix, then "/<bucket>" when path style
};

}  // namespace berth::s3
