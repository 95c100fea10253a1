#pragma once
// The request and response as the handlers see them: plain structs, so that
// handler code needs no Beast and compiles fast.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "berth/auth/authorizer.hpp"
#include "berth/http/server.hpp"
#include "berth/http/services.hpp"
#include "berth/oci/error.hpp"
#include "berth/storage/filling_blob.hpp"
#include "berth/storage/open_blob.hpp"
#include "router.hpp"

namespace berth::ui {
class Sessions;
}

namespace berth::http {

class Cursors;

enum class Method { get, head, put, post, patch, del, other };
inline std::string_view method_name(Method method) {
    switch (method) {
        case Method::get: return "GET";
        case Method::head: return "HEAD";
        case Method::put: return "PUT";
        case Method::post: return "POST";
        case Method::patch: return "PATCH";
        case Method::del: return "DELETE";
        case Method::other: return "OTHER";
    }
    return "OTHER";
}

struct Request {
    Method method = Method::other;
    Target target;
    std::string content_type;
    std::string content_range;
    std::string range;
    std::optional<std::uint64_t> content_length;
    bool has_body = false;
    std::string authorization;
    std::string host;
    std::string cookie;  // the web UI's session (ui_handlers.cpp)
    std::string origin;  // Origin and Sec-Fetch-Site: where a browser says a request came from
    std::string fetch_site;
    std::string forwarded_host;              // X-Forwarded-Host: the host a reverse proxy says the browser used
    bool secure = false;                     // arrived over TLS
    bool certified = false;                  // with a node agent's certificate (tls.client_ca, agent_cert_name)
    auth::Principal principal;               // who made it, once authenticated (anonymous: no name)
    std::optional<auth::TokenAccess> token;  // the access list of the token it presented, if any
    bool from_peer = false;                  // a replica reading through for its client, on the cluster's word
    std::string peer_address;                // the client's IP address
    std::string peer_secret;                 // Berth-Peer-Secret, from another replica
    std::string peer_origin;                 // Berth-Replica: the id of the replica calling
    std::string peer_versions;               // Berth-Protocol: the peer protocol versions it speaks
    bool forwarded = false;                  // Berth-Forwarded: already sent on by a replica
    std::string cache;                       // for the access log: how a mirrored repository's read was answered
};

// What a handler works with: the server's options, what the node gave it, and what the server
// keeps for every request (paging cursors, the web UI's sessions).
struct Context {
    const ServerOptions& options;
    Services& services;
    const Cursors& cursors;
    const ui::Sessions& sessions;
};

// Where a streamed request body goes, chunk by chunk, as it arrives. The
// session reads from the socket straight into the sink's buffer.
class BodySink {
public:
    virtual ~BodySink() = default;
    // Room for the next body bytes. Empty while the sink is behind; it then
    // calls `resume` (from any thread) once it has room again.
    virtual std::span<char> buffer(std::function<void()> resume) = 0;
    // The first `size` bytes of the last buffer() are body.
    virtual void commit(std::size_t size) = 0;
    // The body is complete: store what is still in flight. May block; throws
    // if the body could not be stored.
    virtual void finish() {}
    // While bytes are still being stored, arranges for `ready` to run on the
    // thread that stores the last of them and returns true; false (keeping
    // `ready`) when nothing is in flight or this sink cannot tell.
    virtual bool when_stored(std::function<void()>&) { return false; }
    virtual std::uint64_t offset() const = 0;
};

// A blob's bytes from offset; blob->filling() is set while they are still arriving.
struct FileBody {
    std::shared_ptr<const storage::OpenBlob> blob;
    std::uint64_t offset = 0;
    std::uint64_t length = 0;
};

struct Response {
    int status = 200;
    std::vector<std::pair<std::string, std::string>> headers;
    std::string body;
    // A HEAD answer: no body, but Content-Length says what GET would send.
    std::optional<std::uint64_t> head_length;
    std::optional<FileBody> file;

    void set(std::string name, std::string value) { headers.emplace_back(std::move(name), std::move(value)); }
};

Response error_response(const oci::Error& error);
Response error_response(oci::ErrorCode code, const std::string& message, const std::string& detail = {});

// What the session should do with the request body, then how to answer.
struct Plan {
    enum class Body { none, buffer, stream } body = Body::none;
    std::size_t buffer_limit = 0;
    std::unique_ptr<BodySink> sink;
    // Bytes a Content-Range promised, checked once the body is in.
    std::optional<std::uint64_t> expected_bytes;
    // Runs once the body is in, with the buffered body (empty when streamed) and
    // the sink's offset after the sink has been released.
    std::function<Response(std::string& body, std::uint64_t upload_offset)> finish;
    // Undoes what planning began when the request fails before finish runs.
    std::function<void()> abort;
    // True when finish may block (fsync, large writes) and must stay off the I/O threads.
    bool blocking = true;
};

}  // namespace berth::http
