#include "berth/oci/error.hpp"

#include <nlohmann/json.hpp>

namespace berth::oci {

std::string_view code_name(ErrorCode code) {
    switch (code) {
        case ErrorCode::blob_unknown: return "BLOB_UNKNOWN";
        case ErrorCode::blob_upload_invalid: return "BLOB_UPLOAD_INVALID";
        case ErrorCode::blob_upload_unknown: return "BLOB_UPLOAD_UNKNOWN";
        case ErrorCode::digest_invalid: return "DIGEST_INVALID";
        case ErrorCode::manifest_blob_unknown: return "MANIFEST_BLOB_UNKNOWN";
        case ErrorCode::manifest_invalid: return "MANIFEST_INVALID";
        case ErrorCode::manifest_unknown: return "MANIFEST_UNKNOWN";
        case ErrorCode::name_invalid: return "NAME_INVALID";
        case ErrorCode::name_unknown: return "NAME_UNKNOWN";
        case ErrorCode::size_invalid: return "SIZE_INVALID";
        case ErrorCode::unauthorized: return "UNAUTHORIZED";
        case ErrorCode::denied: return "DENIED";
        case ErrorCode::unsupported: return "UNSUPPORTED";
        case ErrorCode::too_many_requests: return "TOOMANYREQUESTS";
        case ErrorCode::upload_range_invalid: return "BLOB_UPLOAD_INVALID";
        // The spec has no code for an unsatisfiable blob Range; the requested
        // size does not fit the content, which is what SIZE_INVALID says.
        case ErrorCode::range_not_satisfiable: return "SIZE_INVALID";
        case ErrorCode::payload_too_large: return "SIZE_INVALID";
        case ErrorCode::tag_invalid: return "TAG_INVALID";
        case ErrorCode::insufficient_storage: return "DENIED";
        case ErrorCode::unavailable:
        case ErrorCode::gateway_timeout: return "UNAVAILABLE";
        case ErrorCode::bad_request: return "UNSUPPORTED";
        case ErrorCode::internal: return "UNKNOWN";
    }
    return "UNKNOWN";
}

int http_status(ErrorCode code) {
    switch (code) {
        case ErrorCode::blob_unknown:
        case ErrorCode::blob_upload_unknown:
        case ErrorCode::manifest_unknown:
        case ErrorCode::name_unknown: return 404;
        case ErrorCode::unauthorized: return 401;
        case ErrorCode::denied: return 403;
        case ErrorCode::unsupported: return 405;
        case ErrorCode::too_many_requests: return 429;
        case ErrorCode::upload_range_invalid:
        case ErrorCode::range_not_satisfiable: return 416;
        case ErrorCode::payload_too_large: return 413;
        case ErrorCode::insufficient_storage: return 507;
        case ErrorCode::unavailable: return 503;
        case ErrorCode::gateway_timeout: return 504;
        case ErrorCode::internal: return 500;
        default: return 400;
    }
}

std::string error_json(ErrorCode code, std::string_view message, std::string_view detail) {
    nlohmann::json entry = {{"code", code_name(code)}, {"message", message}};
    if (!detail.empty()) entry["detail"] = detail;
    return nlohmann::json{{"errors", nlohmann::json::array({entry})}}.dump(-1, ' ', false,
                                                                           nlohmann::json::error_handler_t::replace);
}

}  // namespace berth::oci
