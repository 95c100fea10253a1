#pragma once
// The two ways S3 writes a time: ISO 8601 in its XML, IMF-fixdate in Last-Modified.
#include <optional>
#include <string_view>

#include "berth/s3/types.hpp"

namespace berth::s3 {

// "2009-10-12T17:50:30.000Z" (the fraction optional, UTC only); nullopt for anything else.
std::optional<Time> parse_iso8601(std::string_view text);
// "Wed, 12 Oct 2009 17:50:00 GMT" (RFC 9110's IMF-fixdate); nullopt for anything else.
std::optional<Time> parse_http_date(std::string_view text);

}  // namespace berth::s3
