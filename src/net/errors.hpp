#pragma once
#include <boost/system/error_code.hpp>
#include <exception>
#include <string>

#include "berth/net/client.hpp"

namespace berth::net {

// The Error for a failed network operation: timeouts, peer closes, bad HTTP
// and TLS alerts each get their kind; anything else gets `otherwise`.
std::exception_ptr make_error(const boost::system::error_code& ec, const std::string& what, Error::Kind otherwise);

inline std::exception_ptr make_error(Error::Kind kind, const std::string& message) {
    return std::make_exception_ptr(Error(kind, message));
}

}  // namespace berth::net
