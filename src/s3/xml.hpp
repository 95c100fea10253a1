#pragma once
// S3's XML: the answers berth reads, parsed with expat within limits on size and depth, with no
// DOCTYPE (so no entity of any kind but XML's own five); and the one body berth writes,
// CompleteMultipartUpload's.
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "berth/s3/types.hpp"

namespace berth::s3::xml {

struct Limits {
    std::size_t max_bytes = 1 << 20;  // a listing of 1000 keys of 1 KiB each would still fit
    std::size_t max_depth = 8;        // S3's answers nest four deep (ListMultipartUploadsResult/Upload/Owner/ID)
};

// A body that is not the document expected: over a limit, malformed, with a DOCTYPE, another
// root element, a field missing or unreadable.
class Malformed : public std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct ErrorDocument {
    std::string code, message;
};

// The root element's name: an answer of 200 may still be an <Error> (CompleteMultipartUpload's).
std::string root_name(std::string_view body, const Limits& limits = {});
// nullopt when the body is not an <Error> document, malformed, or over the limits: an error
// answer is read for what it says, never trusted to be well formed.
std::optional<ErrorDocument> parse_error(std::string_view body, const Limits& limits = {});
// InitiateMultipartUploadResult's UploadId.
std::string parse_upload_id(std::string_view body, const Limits& limits = {});
// ListBucketResult (ListObjectsV2).
ObjectPage parse_object_page(std::string_view body, const Limits& limits = {});
// ListMultipartUploadsResult.
UploadPage parse_upload_page(std::string_view body, const Limits& limits = {});

// Text fit for an element's content or an attribute's value; std::invalid_argument for
// characters XML 1.0 cannot carry at all (controls other than tab, CR and LF).
std::string escape(std::string_view text);
// <CompleteMultipartUpload> of the parts, which must be in ascending order of number, each
// 1..10000 with an ETag (std::invalid_argument otherwise).
std::string complete_multipart_body(const std::vector<Part>& parts);

}  // namespace berth::s3::xml
