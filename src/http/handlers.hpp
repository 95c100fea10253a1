#pragma once
// One function per API route: parse what the route needs, call the registry,
// render the answer. Errors thrown here become the spec's error JSON.
#include "berth/net/client.hpp"
#include "message.hpp"

namespace berth::http {

Plan plan_request(Services& services, Request& request);
// A plan that answers at once, on the I/O thread.
Plan immediate(Response response);
Response json_response(int status, std::string body, std::string content_type = "application/json");
// The peer API (replication/protocol.hpp); the caller has checked the peer secret.
Plan plan_peer_request(replication::PeerService& peers, Request& request);
// Sends an upload request on to the replica that owns the session.
Plan plan_forward(net::Client& client, const net::Origin& owner, const std::string& secret, Request& request,
                  const std::string& method, const std::string& target);

// Range: a single "bytes=a-b", "bytes=a-" or "bytes=-n". nullopt means serve the
// whole blob (no header, or one we may ignore); an unsatisfiable range throws.
struct ByteRange {
    std::uint64_t first;
    std::uint64_t length;
};
std::optional<ByteRange> parse_range(std::string_view header, std::uint64_t size);

// Content-Range of an upload chunk: "a-b" (as Docker sends it) or "bytes a-b/*".
struct ChunkRange {
    std::uint64_t first;
    std::uint64_t last;
};
std::optional<ChunkRange> parse_content_range(std::string_view header);

}  // namespace berth::http
