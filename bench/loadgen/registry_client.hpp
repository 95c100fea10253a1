#pragma once
// The OCI distribution-spec requests a workload is made of, over one connection: blob
// uploads (monolithic, single POST, chunked, cross-repository mount), manifest PUT, GET
// and HEAD, blob GET and the tags list. Each checks the answer's status and throws
// OpError (or NetError from the connection) when the op failed.
#include <openssl/ssl.h>
#include <sys/uio.h>

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

#include "blobs.hpp"
#include "endpoint.hpp"
#include "http_client.hpp"
#include "options.hpp"
#include "stats.hpp"

namespace berth::bench {

struct OpError : std::runtime_error {
    Failure kind;
    OpError(Failure k, const std::string& what) : std::runtime_error(what), kind(k) {}
};

// An image pushed during the setup, for the timed part to pull.
struct Image {
    std::string repo, tag, blob_digest;
    std::uint64_t blob_size = 0;
    std::string manifest;  // as pushed
};

class Client {
public:
    Client(const Endpoint& ep, const Options& o, SSL_CTX* tls, Counters& counters)
        : o_(o), conn_(ep, o.timeout, tls), counters_(counters) {}

    Conn& conn() { return conn_; }

    // GET /v2/, the spec's API version check.
    void api_version_check();

    // Monolithic upload of a blob given as iovecs.
    void upload_monolithic(const std::string& repo, const std::string& digest, std::vector<iovec> body,
                           std::uint64_t len);

    // Single POST ?digest= with the blob as body; a 202 answer falls back to PUT (counted).
    void upload_post(const std::string& repo, const std::string& digest, std::vector<iovec> body, std::uint64_t len);

    // POST, PATCH chunks of --chunk bytes with Content-Range, PUT ?digest=.
    void upload_chunked(const std::string& repo, const BlobSet& set, const Blob& blob);

    void put_manifest(const std::string& repo, const std::string& tag, const std::string& manifest);
    std::string get_manifest(const std::string& repo, const std::string& tag);
    void head_manifest(const std::string& repo, const std::string& tag);

    // GET of a blob, its body counted and discarded; the byte count must be `expected`.
    std::uint64_t get_blob(const std::string& repo, const std::string& digest, std::uint64_t expected);

    // Cross-repository mount (POST ?mount=&from=); a server that answers 202 (no mount)
    // gets the blob uploaded to the session it opened instead. True when it mounted.
    bool mount_blob(const std::string& repo, const std::string& from, const std::string& digest,
                    const std::string& content);

    // The body of GET /v2/<repo>/tags/list.
    std::string tags_list(const std::string& repo);

private:
    const Options& o_;
    Conn conn_;
    Counters& counters_;
};

}  // namespace berth::bench
