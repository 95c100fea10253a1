#pragma once
// The error codes of the distribution spec, and the exception that carries one
// from the registry layer up to whichever front end renders it.
#include <stdexcept>
#include <string>
#include <string_view>

namespace berth::oci {

enum class ErrorCode {
    blob_unknown,
    blob_upload_invalid,
    blob_upload_unknown,
    digest_invalid,
    manifest_blob_unknown,
    manifest_invalid,
    manifest_unknown,
    name_invalid,
    name_unknown,
    size_invalid,
    unauthorized,
    denied,
    unsupported,
    too_many_requests,
    upload_range_invalid,   // 416: a chunk that does not start at the session's offset
    range_not_satisfiable,  // 416: a blob Range outside the blob
    payload_too_large,      // 413 for manifests over the limit
    tag_invalid,
    insufficient_storage,  // 507: the disk is too full to take more
    unavailable,           // 503: a write quorum or a peer could not be reached
    gateway_timeout,       // 504: an upstream or peer did not answer in time
    bad_request,           // 400 for malformed parameters the spec has no code for
    internal,
};

std::string_view code_name(ErrorCode code);
int http_status(ErrorCode code);

class Error : public std::runtime_error {
public:
    Error(ErrorCode code, std::string message, std::string detail = {})
        : std::runtime_error(std::move(message)), code_(code), detail_(std::move(detail)) {}
    ErrorCode code() const { return code_; }
    const std::string& detail() const { return detail_; }

private:
    ErrorCode code_;
    std::string detail_;
};

// {"errors":[{"code":..., "message":..., "detail":...}]}
std::string error_json(ErrorCode code, std::string_view message, std::string_view detail = {});

}  // namespace berth::oci
