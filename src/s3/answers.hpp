#pragma once
// How the S3 client reads S3's answers: errors made s3::Error, bodies read within a bound, and a
// ranged GET's answer checked against the range asked.
#include <cstdint>
#include <string>
#include <string_view>

#include "berth/net/client.hpp"
#include "berth/s3/types.hpp"
#include "xml.hpp"

namespace berth::s3 {

// Every XML answer and error body is read into memory up to this, and no further.
inline constexpr std::size_t max_answer_bytes = 1 << 20;

// An answer other than the one expected, with what S3's error document says, if it sent one;
// retryable when S3 is busy or failing inside, or the request timed out.
Error failure(int status, std::string_view body, const std::string& what);
// No answer: connecting, TLS, a timeout, a connection closed, a malformed or oversized answer.
Error transport_failure(const net::Error& error, const std::string& what);

// The rest of a small answer's body, at most max_answer_bytes of it: an error document or
// nothing, read so the connection may go back to the pool; never a whole object sent by mistake.
std::string small_body(net::Exchange& exchange);

// A document parsed from an answer's body, its flaws an s3::Error.
template <typename Parse>
auto parsed(int status, std::string_view body, const std::string& what, Parse parse) {
    try {
        return parse(body);
    } catch (const xml::Malformed& error) {
        throw Error(status, "", what + ": " + error.what(), false);
    }
}

// How many bytes of a ranged GET's answer (206 or 200) to read for [offset, offset + length):
// fewer than `length` only where the object ends. Throws s3::Error when the answer is not of the
// range asked (Content-Range, Content-Length).
std::uint64_t bytes_to_read(const net::ResponseHead& head, std::uint64_t offset, std::uint64_t length,
                            const std::string& what);

}  // namespace berth::s3
