#pragma once
// A request as the handlers see it (message.hpp), from the head Beast parsed.
#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/message.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "message.hpp"

namespace berth::http {

// nullopt for a target that is not a path (absolute-form, '*', bad escapes). content_length
// and has_body come from the parser; peer is the client's address.
std::optional<Request> request_from_head(const boost::beast::http::request_header<>& head,
                                         std::optional<std::uint64_t> content_length, bool has_body,
                                         const std::string& peer, bool secure);

}  // namespace berth::http
