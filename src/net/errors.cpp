#include "errors.hpp"

#include <boost/asio/error.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>

namespace berth::net {

namespace asio = boost::asio;
namespace beast = boost::beast;

std::exception_ptr make_error(const boost::system::error_code& ec, const std::string& what, Error::Kind otherwise) {
    namespace http = beast::http;
    auto kind = otherwise;
    if (ec == beast::error::timeout) kind = Error::Kind::timeout;
    else if (ec == http::error::body_limit) kind = Error::Kind::too_large;
    else if (ec == http::error::end_of_stream || ec == http::error::partial_message ||
             ec == asio::ssl::error::stream_truncated || ec == asio::error::eof ||
             ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
             ec == asio::error::connection_aborted || ec == asio::error::operation_aborted ||
             ec == asio::error::bad_descriptor)
        kind = Error::Kind::closed;
    else if (ec.category() == http::make_error_code(http::error::end_of_stream).category())
        kind = Error::Kind::protocol;
    else if (ec.category() == asio::error::get_ssl_category() ||
             ec.category() == asio::ssl::error::get_stream_category())
        kind = Error::Kind::tls;
    return make_error(kind, what + ": " + (kind == Error::Kind::timeout ? std::string("timed out") : ec.message()));
}

}  // namespace berth::net
