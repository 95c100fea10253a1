#pragma once
// A blocking HTTP/1.1 keep-alive client connection over POSIX sockets, or over OpenSSL
// for https://. Bodies in pool memory (pool_memory.hpp) go out with sendfile(2): the
// kernel sends the pool's pages without copying them, so the generator takes as little
// as it can of the cores it shares with the server under test. Over TLS they are handed
// to SSL_write straight from the mapping (TLS has to encrypt them, so there is no
// sendfile to keep), and a connection opened again offers the session of the one before,
// so that a resumed handshake can be measured against a full one.
#include <openssl/ssl.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "endpoint.hpp"
#include "pool_memory.hpp"

namespace berth::bench {

// How an op failed; each kind has its own error count in the result.
enum class Failure { none, status, connection, short_read, verify };

struct NetError : std::runtime_error {
    Failure kind;
    NetError(Failure k, const std::string& what) : std::runtime_error(what), kind(k) {}
};

struct Response {
    int status = 0;
    std::map<std::string, std::string> headers;  // lower-case names
    std::string body;                            // kept only when asked
    std::uint64_t body_bytes = 0;
    std::string header(const std::string& name) const {
        auto it = headers.find(name);
        return it == headers.end() ? std::string() : it->second;
    }
};

struct Request {
    const char* method = "GET";
    std::string target;
    std::string headers;      // extra header lines, each ending in \r\n
    std::vector<iovec> body;  // may be empty
    std::uint64_t body_len = 0;
    bool keep_body = true;  // false: count and discard
};

class Conn {
public:
    // tls: the client context for https:// (null for http://).
    Conn(const Endpoint& ep, double timeout, SSL_CTX* tls) : ep_(ep), timeout_(timeout), tls_(tls), scratch_(1 << 20) {}
    ~Conn();
    Conn(const Conn&) = delete;
    Conn& operator=(const Conn&) = delete;

    // Connections opened; over TLS, their handshakes that resumed a session and those that did not.
    struct Stats {
        std::uint64_t connections = 0, resumed = 0, full = 0;
    } stats;

    // Drops the connection, sending nothing more (after a failure).
    void close();

    // Closes in order: over TLS a close_notify goes first, without which OpenSSL
    // takes the connection for broken and marks its session as not resumable.
    void end();

    // What the last handshake agreed on, e.g. "TLSv1.3 TLS_AES_128_GCM_SHA256" (empty before one).
    std::string negotiated() const { return cipher_ ? std::string(version_) + ' ' + SSL_CIPHER_get_name(cipher_) : ""; }

    // The client context's new-session callback: the connection that received a
    // session keeps the newest one for its next handshake. TLS 1.3 servers send
    // their tickets after the handshake, so they arrive with the first answer.
    static int keep_session(SSL* ssl, SSL_SESSION* session);

    // Opens a new connection (closing the current one), with its TLS handshake for https://.
    void connect();

    // One request and its answer, connecting first when closed; throws NetError. `head`:
    // the answer to a HEAD has no body.
    Response request(const Request& rq, bool head = false);

private:
    void handshake();
    void send_all(std::vector<iovec>& iov);
    void send_file(const FileBacked& region, const iovec& part);
    void send_memory(std::vector<iovec>& iov, std::size_t idx, std::size_t end, bool more);
    void send_tls(const std::vector<iovec>& iov);
    void write_tls(const void* data, std::size_t n);
    std::size_t receive(char* p, std::size_t n, Failure kind, const char* what);
    bool fill();
    std::string read_line();
    void read_body(std::uint64_t n, std::string* out, Response& r);
    Response read_response(bool keep_body, bool head);

    const Endpoint& ep_;
    double timeout_;
    SSL_CTX* tls_;
    SSL* ssl_ = nullptr;
    SSL_SESSION* session_ = nullptr;  // the newest session received, offered by the next handshake
    const char* version_ = nullptr;   // of the last handshake (static strings of libssl)
    const SSL_CIPHER* cipher_ = nullptr;
    std::string gather_;  // send_tls: small pieces written as one
    int fd_ = -1;
    std::string buf_;
    std::size_t pos_ = 0;
    std::vector<char> scratch_;
};

}  // namespace berth::bench
