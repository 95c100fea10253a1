#pragma once
// What the S3 client answers and throws: objects, listings, multipart uploads and S3's errors,
// typed here so the XML never leaves the s3 layer.
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace berth::s3 {

using Time = std::chrono::system_clock::time_point;

// An answer S3 gave that is not the one asked for, or no answer at all.
class Error : public std::runtime_error {
public:
    Error(int status, std::string code, const std::string& message, bool retryable)
        : std::runtime_error(message), status_(status), code_(std::move(code)), retryable_(retryable) {}
    // The HTTP status; 0 when no answer came (connecting, TLS, a timeout, a closed connection)
    // or the answer could not be read (malformed, too large).
    int status() const noexcept { return status_; }
    // S3's code from the error document ("NoSuchKey", "NoSuchUpload", "SlowDown"), "" when none came.
    const std::string& code() const noexcept { return code_; }
    // Whether the same request may succeed if sent again later: S3 busy or failing inside, a
    // network failure. A GET that failed part-way has already handed some bytes to its sink.
    bool retryable() const noexcept { return retryable_; }

private:
    int status_;
    std::string code_;
    bool retryable_;
};

struct ObjectInfo {
    std::uint64_t size = 0;
    Time last_modified;
};

// One object of a listing (ListObjectsV2's Contents).
struct ListedObject {
    std::string key;
    std::uint64_t size = 0;
    Time last_modified;
    std::string etag;  // as S3 gave it, quotes included
};

struct ObjectPage {
    std::vector<ListedObject> objects;
    bool truncated = false;
    std::string next_continuation_token;  // for the next page when truncated
};

// A multipart upload not yet completed or aborted.
struct Upload {
    std::string key;
    std::string upload_id;
    Time initiated;
};

struct UploadPage {
    std::vector<Upload> uploads;
    bool truncated = false;
    std::string next_key_marker, next_upload_id_marker;  // for the next page when truncated
};

// Where ListMultipartUploads starts: after this key (and, within it, after this upload id).
struct UploadMarkers {
    std::string key_marker, upload_id_marker;
};

// A part of a multipart upload, as CompleteMultipartUpload names it.
struct Part {
    int number = 0;    // 1..10000
    std::string etag;  // as UploadPart answered it
};

}  // namespace berth::s3
