// berth-bench: a load generator for OCI distribution-spec registries.
//
// One blocking HTTP/1.1 keep-alive connection per worker thread (POSIX sockets),
// SHA-256 through OpenSSL EVP. Every blob's content and digest are prepared before
// the clock starts: a small pool of random buffers supplies the bulk of each blob
// and a unique random 64-byte trailer makes every blob distinct. Because the
// trailer comes last, the SHA-256 state after each pool buffer is computed once and
// cloned per blob, so even millions of 100 MiB blob digests cost almost nothing.
// The pool lives in memfds and bodies go out with sendfile(2): the kernel sends
// the pool's pages without copying them, so the generator takes as little as it
// can of the cores it shares with the server under test.
//
// https:// URLs go through OpenSSL: bodies are handed to SSL_write straight from
// the mapped pool (TLS has to encrypt them, so there is no sendfile to keep), and
// a connection opened again offers the session of the one before, so that a
// resumed handshake can be measured against a full one.
//
// Run `berth-bench --help` for the workloads and flags.

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::uint64_t MiB = 1ull << 20;
constexpr std::uint64_t GiB = 1ull << 30;
constexpr const char* kManifestType = "application/vnd.oci.image.manifest.v1+json";
constexpr const char* kConfigType = "application/vnd.oci.image.config.v1+json";
constexpr const char* kLayerType = "application/vnd.oci.image.layer.v1.tar";

// ---------------------------------------------------------------------------
// Options

struct Options {
    std::string url = "http://127.0.0.1:5000";
    std::string workload = "push-monolithic";
    std::uint64_t size = MiB;
    int concurrency = 1;
    double seconds = 0;
    std::uint64_t ops = 0;
    std::uint64_t chunk = 5 * MiB;
    int images = 0;  // pull/mixed: distinct images to pull from (0: automatic)
    int tags = 100;  // tags-list: tags in the listed repository
    // fill-manifests: manifest i goes to repository <repo_prefix>/r<i / per_repo> as tag t<i>,
    // per_repo = ceil(total / repos); this run PUTs manifests first .. first+ops-1.
    std::uint64_t repos = 10000;
    std::uint64_t first = 0;
    std::uint64_t total = 0;  // 0: first + ops
    std::string repo_prefix = "fill";
    double progress = 0;  // fill-manifests: a progress line on stderr every this many seconds (0: none)
    long server_pid = 0;
    bool json = false;
    bool setup_only = false;
    bool quiet = false;
    double timeout = 120;
    std::string cacert;        // https: trust the CAs in this file instead of the system's
    bool insecure = false;     // https: no certificate check at all
    std::string ciphersuites;  // https: TLS 1.3 suites offered, in order (empty: OpenSSL's default)
    bool reconnect = false;    // a new connection for every op
    bool resume = true;        // https: a new connection offers the previous one's session
};

[[noreturn]] void usage(int code) {
    std::fprintf(code ? stderr : stdout, R"(Usage: berth-bench [flags]

Workloads (--workload NAME):
  push-monolithic  POST /blobs/uploads/, then PUT ?digest= with the whole blob
  push-post        single POST /blobs/uploads/?digest= with the blob as body
                   (a 202 answer falls back to PUT with the body, per the spec;
                   fallbacks are counted)
  push-chunked     POST, PATCH chunks of --chunk bytes with Content-Range, PUT ?digest=
                   (every push also PUTs a small OCI manifest referencing the blob
                   under a new tag)
  pull             GET manifest by tag, then GET the blob it names; bytes verified
  mixed            alternate ops: push-monolithic, pull
  manifest-get     GET a manifest by tag
  manifest-head    HEAD a manifest by tag
  tags-list        GET /v2/<repo>/tags/list of a repository with --tags tags
  fill-manifests   populate a registry fast: --ops distinct manifests (all sharing one
                   config blob and one 1 KiB layer, told apart by an annotation),
                   each PUT by its own tag, spread over --repos repositories; the
                   two blobs are pushed once and mounted into every new repository
                   first (timed too). Manifest i (from --first) goes to
                   <prefix>/r<i / P, 5 digits> as tag t<i, 7 digits>, with
                   P = ceil(--total / --repos), so a fill can be grown in steps

Flags:
  --url URL            registry base URL, http:// or https:// (default http://127.0.0.1:5000)
  --workload NAME      see above (default push-monolithic)
  --size BYTES         blob size; suffixes K, M, G = KiB, MiB, GiB (default 1M)
  --concurrency N      connections, one thread each (default 1)
  --seconds S          stop starting ops after S seconds
  --ops N              stop after N ops (default: 10 s if neither is given)
  --chunk BYTES        push-chunked chunk size (default 5M)
  --images N           pull/mixed: distinct images to pull (default: automatic)
  --tags N             tags-list: tags in the repository (default 100)
  --repos R            fill-manifests: repositories of the whole fill (default 10000)
  --first K            fill-manifests: index of the first manifest to PUT (default 0)
  --total T            fill-manifests: manifests of the whole fill (default --first + --ops)
  --repo-prefix P      fill-manifests: repository name prefix (default fill)
  --progress S         fill-manifests: print progress to stderr every S seconds
  --server-pid PID     sample the server's CPU time and RSS from /proc
  --timeout S          socket send/receive timeout (default 120)
  --cacert FILE        https: verify the server's certificate (and host name or
                       address) against the CAs in FILE instead of the system's
  --insecure           https: do not verify the server's certificate
  --tls-ciphersuites L TLS 1.3 suites to offer, in order of preference, colon-separated
                       (default OpenSSL's: TLS_AES_256_GCM_SHA384 first)
  --reconnect          open a new connection for every op (closed after it)
  --no-resume          https: full handshake on every new connection (by default a
                       connection resumes the session of the client's previous one)
  --setup-only         do the setup (manifest-*/tags-list) and print repo/tag as JSON
  --json               print the result as one JSON line (after the text unless --quiet)
  --quiet              no human-readable output
)");
    std::exit(code);
}

std::uint64_t parse_size(const std::string& text) {
    char* end = nullptr;
    double value = std::strtod(text.c_str(), &end);
    std::string suffix(end);
    std::uint64_t mult = 1;
    if (suffix == "K" || suffix == "k" || suffix == "KiB") mult = 1ull << 10;
    else if (suffix == "M" || suffix == "m" || suffix == "MiB") mult = MiB;
    else if (suffix == "G" || suffix == "g" || suffix == "GiB") mult = GiB;
    else if (!suffix.empty()) throw std::invalid_argument("bad size: " + text);
    if (value < 0) throw std::invalid_argument("bad size: " + text);
    return static_cast<std::uint64_t>(value * mult);
}

Options parse_options(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "%s needs a value\n", a.c_str());
                usage(2);
            }
            return argv[++i];
        };
        if (a == "--help" || a == "-h") usage(0);
        else if (a == "--url") o.url = next();
        else if (a == "--workload") o.workload = next();
        else if (a == "--size") o.size = parse_size(next());
        else if (a == "--concurrency" || a == "-c") o.concurrency = std::stoi(next());
        else if (a == "--seconds") o.seconds = std::stod(next());
        else if (a == "--ops") o.ops = std::stoull(next());
        else if (a == "--chunk") o.chunk = parse_size(next());
        else if (a == "--images") o.images = std::stoi(next());
        else if (a == "--tags") o.tags = std::stoi(next());
        else if (a == "--repos") o.repos = std::stoull(next());
        else if (a == "--first") o.first = std::stoull(next());
        else if (a == "--total") o.total = std::stoull(next());
        else if (a == "--repo-prefix") o.repo_prefix = next();
        else if (a == "--progress") o.progress = std::stod(next());
        else if (a == "--server-pid") o.server_pid = std::stol(next());
        else if (a == "--timeout") o.timeout = std::stod(next());
        else if (a == "--cacert") o.cacert = next();
        else if (a == "--insecure") o.insecure = true;
        else if (a == "--tls-ciphersuites") o.ciphersuites = next();
        else if (a == "--reconnect") o.reconnect = true;
        else if (a == "--no-resume") o.resume = false;
        else if (a == "--setup-only") o.setup_only = true;
        else if (a == "--json") o.json = true;
        else if (a == "--quiet") o.quiet = true;
        else {
            std::fprintf(stderr, "unknown flag %s\n", a.c_str());
            usage(2);
        }
    }
    static const char* known[] = {"push-monolithic", "push-post",     "push-chunked", "pull",          "mixed",
                                  "manifest-get",    "manifest-head", "tags-list",    "fill-manifests"};
    if (std::find_if(std::begin(known), std::end(known), [&](const char* k) { return o.workload == k; }) ==
        std::end(known)) {
        std::fprintf(stderr, "unknown workload %s\n", o.workload.c_str());
        usage(2);
    }
    if (o.concurrency < 1) o.concurrency = 1;
    if (o.chunk == 0) o.chunk = 5 * MiB;
    if (o.workload == "fill-manifests") {
        if (o.ops == 0) {
            std::fprintf(stderr, "fill-manifests needs --ops\n");
            usage(2);
        }
        if (o.repos == 0) o.repos = 1;
        if (o.total == 0) o.total = o.first + o.ops;
        if (o.total < o.first + o.ops) {
            std::fprintf(stderr, "--total must cover --first + --ops\n");
            usage(2);
        }
    }
    if (o.seconds <= 0 && o.ops == 0) o.seconds = 10;
    if (o.size == 0) o.size = 1;
    return o;
}

// ---------------------------------------------------------------------------
// Random content and digests

struct SplitMix {
    std::uint64_t s;
    std::uint64_t next() {
        std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    void fill(unsigned char* p, std::size_t n) {
        while (n >= 8) {
            std::uint64_t v = next();
            std::memcpy(p, &v, 8);
            p += 8;
            n -= 8;
        }
        if (n) {
            std::uint64_t v = next();
            std::memcpy(p, &v, n);
        }
    }
};

std::string hex(const unsigned char* p, std::size_t n) {
    static const char* digits = "0123456789abcdef";
    std::string out(n * 2, '0');
    for (std::size_t i = 0; i < n; ++i) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    return out;
}

std::string sha256_digest(const void* data, std::size_t n) {
    unsigned char md[32];
    unsigned int len = 0;
    EVP_Digest(data, n, md, &len, EVP_sha256(), nullptr);
    return "sha256:" + hex(md, 32);
}

// Memory mapped from a memfd, so that sendfile can send it. Set up before any
// request and never changed after, so the senders read it without a lock.
struct FileBacked {
    const unsigned char* base;
    std::size_t length;
    int fd;
};
std::vector<FileBacked> file_backed;

// `size` bytes mapped from a new memfd (plain memory if that fails).
unsigned char* allocate_pool_buffer(std::size_t size) {
    const std::size_t length = std::max<std::size_t>(size, 1);
    int fd = ::memfd_create("berth-bench-pool", MFD_CLOEXEC);
    if (fd >= 0 && ::ftruncate(fd, static_cast<off_t>(length)) == 0) {
        void* map = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (map != MAP_FAILED) {
            file_backed.push_back({static_cast<unsigned char*>(map), length, fd});
            return static_cast<unsigned char*>(map);
        }
    }
    if (fd >= 0) ::close(fd);
    return new unsigned char[length];
}

const FileBacked* backing_of(const void* data) {
    auto* p = static_cast<const unsigned char*>(data);
    for (auto& region : file_backed)
        if (p >= region.base && p < region.base + region.length) return &region;
    return nullptr;
}

// A blob = pool[pool_index][0, prefix) followed by its own trailer (up to 64 bytes).
struct Blob {
    std::uint32_t pool_index = 0;
    unsigned char trailer[64];
    std::string digest;
};

class BlobSet {
public:
    BlobSet(std::uint64_t size, std::uint64_t seed) : size_(size), rng_{seed} {
        trailer_len_ = std::min<std::uint64_t>(64, size);
        prefix_len_ = size - trailer_len_;
        std::size_t n_pool = prefix_len_ == 0 ? 1 : std::clamp<std::uint64_t>((256 * MiB) / size, 1, 8);
        if (size >= 64 * MiB) n_pool = 2;
        pool_.resize(n_pool);
        for (auto& buf : pool_) {
            buf = allocate_pool_buffer(prefix_len_);  // lives as long as the process
            rng_.fill(buf, prefix_len_);
            EVP_MD_CTX* ctx = EVP_MD_CTX_new();
            EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
            EVP_DigestUpdate(ctx, buf, prefix_len_);
            prefix_ctx_.push_back(ctx);
        }
    }
    ~BlobSet() {
        for (auto* c : prefix_ctx_) EVP_MD_CTX_free(c);
    }
    BlobSet(const BlobSet&) = delete;
    BlobSet& operator=(const BlobSet&) = delete;

    Blob make() {
        Blob b;
        b.pool_index = static_cast<std::uint32_t>(counter_++ % pool_.size());
        rng_.fill(b.trailer, sizeof b.trailer);
        EVP_MD_CTX* ctx = EVP_MD_CTX_new();
        EVP_MD_CTX_copy_ex(ctx, prefix_ctx_[b.pool_index]);
        EVP_DigestUpdate(ctx, b.trailer, trailer_len_);
        unsigned char md[32];
        unsigned int len = 0;
        EVP_DigestFinal_ex(ctx, md, &len);
        EVP_MD_CTX_free(ctx);
        b.digest = "sha256:" + hex(md, 32);
        return b;
    }

    // iovecs covering [offset, offset + length) of the blob.
    std::vector<iovec> range(const Blob& b, std::uint64_t offset, std::uint64_t length) const {
        std::vector<iovec> out;
        std::uint64_t end = offset + length;
        if (offset < prefix_len_) {
            std::uint64_t e = std::min(end, prefix_len_);
            out.push_back({pool_[b.pool_index] + offset, static_cast<std::size_t>(e - offset)});
        }
        if (end > prefix_len_) {
            std::uint64_t s = std::max(offset, prefix_len_) - prefix_len_;
            out.push_back({const_cast<unsigned char*>(b.trailer) + s, static_cast<std::size_t>(end - prefix_len_ - s)});
        }
        return out;
    }
    std::uint64_t size() const { return size_; }

private:
    std::uint64_t size_, prefix_len_, trailer_len_;
    SplitMix rng_;
    std::uint64_t counter_ = 0;
    std::vector<unsigned char*> pool_;
    std::vector<EVP_MD_CTX*> prefix_ctx_;
};

// ---------------------------------------------------------------------------
// HTTP/1.1 client

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

struct Endpoint {
    bool tls = false;
    std::string host;
    int port = 80;
    std::string host_header;
    bool host_is_address = false;  // an IPv4/IPv6 literal: no SNI, the certificate must name the address
    sockaddr_storage addr{};
    socklen_t addr_len = 0;
};

Endpoint parse_url(const std::string& url) {
    Endpoint ep;
    std::string rest = url;
    if (rest.rfind("http://", 0) == 0) {
        rest = rest.substr(7);
    } else if (rest.rfind("https://", 0) == 0) {
        rest = rest.substr(8);
        ep.tls = true;
        ep.port = 443;
    } else if (rest.find("://") != std::string::npos) {
        throw std::invalid_argument("only http:// and https:// URLs are supported");
    }
    auto slash = rest.find('/');
    if (slash != std::string::npos) rest = rest.substr(0, slash);
    ep.host_header = rest;
    auto colon = rest.rfind(':');
    if (colon != std::string::npos && rest.find(']') == std::string::npos) {
        ep.host = rest.substr(0, colon);
        ep.port = std::stoi(rest.substr(colon + 1));
    } else if (colon != std::string::npos && rest.back() != ']') {
        ep.host = rest.substr(1, rest.rfind(']') - 1);
        ep.port = std::stoi(rest.substr(colon + 1));
    } else {
        ep.host = rest;
    }
    addrinfo hints{}, *res = nullptr;
    hints.ai_socktype = SOCK_STREAM;
    std::string port = std::to_string(ep.port);
    if (getaddrinfo(ep.host.c_str(), port.c_str(), &hints, &res) != 0 || !res)
        throw std::invalid_argument("cannot resolve " + ep.host);
    std::memcpy(&ep.addr, res->ai_addr, res->ai_addrlen);
    ep.addr_len = res->ai_addrlen;
    freeaddrinfo(res);
    unsigned char raw[sizeof(in6_addr)];
    ep.host_is_address =
        inet_pton(AF_INET, ep.host.c_str(), raw) == 1 || inet_pton(AF_INET6, ep.host.c_str(), raw) == 1;
    return ep;
}

// What the error queue says, drained (SSL_get_error would take a stale entry for a new failure).
std::string tls_errors() {
    std::string out;
    char text[256];
    for (unsigned long e; (e = ERR_get_error()) != 0;) {
        ERR_error_string_n(e, text, sizeof text);
        out += ": ";
        out += text;
    }
    return out;
}

// Why an OpenSSL I/O call on `ssl` that returned `ret` failed.
std::string tls_failure(SSL* ssl, int ret, const char* what) {
    const int saved_errno = errno;
    std::string out = what;
    switch (SSL_get_error(ssl, ret)) {
        case SSL_ERROR_WANT_READ:
        case SSL_ERROR_WANT_WRITE: out += ": timed out"; break;  // SO_RCVTIMEO/SO_SNDTIMEO on a blocking socket
        case SSL_ERROR_SYSCALL:
            out += std::string(": ") + (saved_errno ? std::strerror(saved_errno) : "connection closed");
            break;
        case SSL_ERROR_ZERO_RETURN: out += ": connection closed"; break;
        default: break;
    }
    return out + tls_errors();
}

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
    ~Conn() {
        close();
        if (session_) SSL_SESSION_free(session_);
    }

    // Connections opened; over TLS, their handshakes that resumed a session and those that did not.
    struct Stats {
        std::uint64_t connections = 0, resumed = 0, full = 0;
    } stats;

    // Drops the connection, sending nothing more (after a failure).
    void close() {
        if (ssl_) SSL_free(ssl_);
        ssl_ = nullptr;
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
        buf_.clear();
        pos_ = 0;
    }

    // Closes in order: over TLS a close_notify goes first, without which OpenSSL
    // takes the connection for broken and marks its session as not resumable.
    void end() {
        if (ssl_ && SSL_shutdown(ssl_) < 0) ERR_clear_error();
        close();
    }

    // What the last handshake agreed on, e.g. "TLSv1.3 TLS_AES_128_GCM_SHA256" (empty before one).
    std::string negotiated() const { return cipher_ ? std::string(version_) + ' ' + SSL_CIPHER_get_name(cipher_) : ""; }

    // The client context's new-session callback: the connection that received a
    // session keeps the newest one for its next handshake. TLS 1.3 servers send
    // their tickets after the handshake, so they arrive with the first answer.
    static int keep_session(SSL* ssl, SSL_SESSION* session) {
        auto* self = static_cast<Conn*>(SSL_get_app_data(ssl));
        if (self->session_) SSL_SESSION_free(self->session_);
        self->session_ = session;
        return 1;  // the reference is ours now
    }

    void connect() {
        close();
        fd_ = ::socket(ep_.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd_ < 0) throw NetError(Failure::connection, std::string("socket: ") + std::strerror(errno));
        int one = 1;
        setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        timeval tv{};
        tv.tv_sec = static_cast<long>(timeout_);
        tv.tv_usec = static_cast<long>((timeout_ - tv.tv_sec) * 1e6);
        setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        if (::connect(fd_, reinterpret_cast<const sockaddr*>(&ep_.addr), ep_.addr_len) != 0) {
            int e = errno;
            close();
            throw NetError(Failure::connection, std::string("connect: ") + std::strerror(e));
        }
        ++stats.connections;
        if (tls_) handshake();
    }

    Response request(const Request& rq, bool head = false) {
        if (fd_ < 0) connect();
        std::string head_text;
        head_text.reserve(256 + rq.target.size() + rq.headers.size());
        head_text += rq.method;
        head_text += ' ';
        head_text += rq.target;
        head_text += " HTTP/1.1\r\nHost: ";
        head_text += ep_.host_header;
        head_text += "\r\nUser-Agent: berth-bench\r\n";
        head_text += rq.headers;
        bool has_body = !rq.body.empty() || rq.body_len > 0 || std::strcmp(rq.method, "PUT") == 0 ||
                        std::strcmp(rq.method, "POST") == 0 || std::strcmp(rq.method, "PATCH") == 0;
        if (has_body) head_text += "Content-Length: " + std::to_string(rq.body_len) + "\r\n";
        head_text += "\r\n";
        std::vector<iovec> iov;
        iov.reserve(rq.body.size() + 1);
        iov.push_back({head_text.data(), head_text.size()});
        for (auto& v : rq.body)
            if (v.iov_len) iov.push_back(v);
        try {
            send_all(iov);
        } catch (const NetError&) {
            // The server may have answered early (e.g. an error) and closed; try to read that answer.
            try {
                Response r = read_response(rq.keep_body, head);
                close();
                return r;
            } catch (const NetError&) {
                close();
                throw;
            }
        }
        try {
            return read_response(rq.keep_body, head);
        } catch (const NetError&) {
            close();
            throw;
        }
    }

private:
    void handshake() {
        ssl_ = SSL_new(tls_);
        if (!ssl_ || SSL_set_fd(ssl_, fd_) != 1) {
            close();
            throw NetError(Failure::connection, "TLS setup" + tls_errors());
        }
        SSL_set_app_data(ssl_, this);
        // SNI carries host names only (RFC 6066); the certificate check takes an
        // address too (OpenSSL 3's SSL_set1_host reads an address literal as one).
        if (!ep_.host_is_address) SSL_set_tlsext_host_name(ssl_, ep_.host.c_str());
        if (SSL_get_verify_mode(ssl_) != SSL_VERIFY_NONE) SSL_set1_host(ssl_, ep_.host.c_str());
        if (session_) SSL_set_session(ssl_, session_);
        int ret = SSL_connect(ssl_);
        if (ret != 1) {
            std::string msg = tls_failure(ssl_, ret, "TLS handshake");
            long verify = SSL_get_verify_result(ssl_);
            if (verify != X509_V_OK) msg += std::string(": ") + X509_verify_cert_error_string(verify);
            close();
            throw NetError(Failure::connection, msg);
        }
        ++(SSL_session_reused(ssl_) ? stats.resumed : stats.full);
        version_ = SSL_get_version(ssl_);
        cipher_ = SSL_get_current_cipher(ssl_);
    }

    // Runs of plain memory go out with sendmsg, pool memory with sendfile.
    void send_all(std::vector<iovec>& iov) {
        if (ssl_) return send_tls(iov);
        std::size_t from = 0;
        for (std::size_t i = 0; i < iov.size(); ++i) {
            auto* region = backing_of(iov[i].iov_base);
            if (!region) continue;
            send_memory(iov, from, i, true);
            send_file(*region, iov[i]);
            from = i + 1;
        }
        send_memory(iov, from, iov.size(), false);
    }

    void send_file(const FileBacked& region, const iovec& part) {
        off_t offset = static_cast<const unsigned char*>(part.iov_base) - region.base;
        std::size_t left = part.iov_len;
        while (left > 0) {
            ssize_t n = ::sendfile(fd_, region.fd, &offset, left);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0)
                throw NetError(Failure::connection, std::string("sendfile: ") + std::strerror(n ? errno : EPIPE));
            left -= static_cast<std::size_t>(n);
        }
    }

    // iov[idx, end); `more`: further body follows, so the kernel may hold a partial packet.
    void send_memory(std::vector<iovec>& iov, std::size_t idx, std::size_t end, bool more) {
        while (idx < end) {
            msghdr msg{};
            msg.msg_iov = iov.data() + idx;
            msg.msg_iovlen = std::min<std::size_t>(end - idx, IOV_MAX);
            ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL | (more ? MSG_MORE : 0));
            if (n < 0) {
                if (errno == EINTR) continue;
                throw NetError(Failure::connection, std::string("send: ") + std::strerror(errno));
            }
            std::size_t left = static_cast<std::size_t>(n);
            while (idx < end && left >= iov[idx].iov_len) {
                left -= iov[idx].iov_len;
                ++idx;
            }
            if (left) {
                iov[idx].iov_base = static_cast<char*>(iov[idx].iov_base) + left;
                iov[idx].iov_len -= left;
            }
        }
    }

    // Over TLS, pieces smaller than a record are gathered and written together;
    // larger ones (the pool's mappings) go to SSL_write whole, which encrypts them
    // record by record straight from the mapping. Partial writes stay off
    // (OpenSSL's default, no SSL_MODE_ENABLE_PARTIAL_WRITE): SSL_write_ex returns
    // once all of a piece is written, or fails.
    void send_tls(const std::vector<iovec>& iov) {
        gather_.clear();
        for (const auto& v : iov) {
            if (v.iov_len < SSL3_RT_MAX_PLAIN_LENGTH) {
                gather_.append(static_cast<const char*>(v.iov_base), v.iov_len);
                continue;
            }
            write_tls(gather_.data(), gather_.size());
            gather_.clear();
            write_tls(v.iov_base, v.iov_len);
        }
        write_tls(gather_.data(), gather_.size());
    }

    void write_tls(const void* data, std::size_t n) {
        std::size_t written = 0;
        if (n > 0 && SSL_write_ex(ssl_, data, n, &written) != 1)
            throw NetError(Failure::connection, tls_failure(ssl_, 0, "SSL_write"));
    }

    // Up to n bytes into p, with recv or, over TLS, SSL_read; 0 on orderly close.
    std::size_t receive(char* p, std::size_t n, Failure kind, const char* what) {
        if (!ssl_) {
            for (;;) {
                ssize_t got = ::recv(fd_, p, n, 0);
                if (got >= 0) return static_cast<std::size_t>(got);
                if (errno != EINTR) throw NetError(kind, std::string(what) + ": " + std::strerror(errno));
            }
        }
        std::size_t got = 0;
        int ret = SSL_read_ex(ssl_, p, n, &got);
        if (ret == 1) return got;
        if (SSL_get_error(ssl_, ret) == SSL_ERROR_ZERO_RETURN) return 0;
        throw NetError(kind, tls_failure(ssl_, ret, what));
    }

    // Appends received bytes to buf_; false on orderly close.
    bool fill() {
        if (pos_ > 0 && pos_ == buf_.size()) {
            buf_.clear();
            pos_ = 0;
        } else if (pos_ > (1 << 16)) {
            buf_.erase(0, pos_);
            pos_ = 0;
        }
        char tmp[65536];
        std::size_t n = receive(tmp, sizeof tmp, Failure::connection, "recv");
        buf_.append(tmp, n);
        return n > 0;
    }

    std::string read_line() {
        for (;;) {
            auto e = buf_.find("\r\n", pos_);
            if (e != std::string::npos) {
                std::string line = buf_.substr(pos_, e - pos_);
                pos_ = e + 2;
                return line;
            }
            if (buf_.size() - pos_ > 65536) throw NetError(Failure::connection, "line too long");
            if (!fill()) throw NetError(Failure::short_read, "connection closed mid-line");
        }
    }

    // Reads n body bytes, keeping them in *out when given.
    void read_body(std::uint64_t n, std::string* out, Response& r) {
        std::size_t avail = std::min<std::uint64_t>(n, buf_.size() - pos_);
        if (out) out->append(buf_, pos_, avail);
        pos_ += avail;
        n -= avail;
        r.body_bytes += avail;
        while (n > 0) {
            std::size_t want = std::min<std::uint64_t>(n, scratch_.size());
            std::size_t got = receive(scratch_.data(), want, Failure::short_read, "recv body");
            if (got == 0)
                throw NetError(Failure::short_read,
                               "connection closed with " + std::to_string(n) + " body bytes missing");
            if (out) out->append(scratch_.data(), got);
            n -= got;
            r.body_bytes += got;
        }
    }

    Response read_response(bool keep_body, bool head) {
        Response r;
        for (;;) {
            std::string status = read_line();
            if (status.rfind("HTTP/1.", 0) != 0 || status.size() < 12)
                throw NetError(Failure::connection, "bad status line: " + status.substr(0, 80));
            r.status = std::atoi(status.c_str() + 9);
            r.headers.clear();
            for (;;) {
                std::string line = read_line();
                if (line.empty()) break;
                auto colon = line.find(':');
                if (colon == std::string::npos) continue;
                std::string name = line.substr(0, colon);
                for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
                std::size_t v = colon + 1;
                while (v < line.size() && (line[v] == ' ' || line[v] == '\t')) ++v;
                r.headers[name] = line.substr(v);
            }
            if (r.status >= 200) break;  // skip 1xx interim answers
        }
        bool close_after = false;
        std::string connection = r.header("connection");
        for (auto& ch : connection) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        if (connection.find("close") != std::string::npos) close_after = true;
        std::string* out = keep_body ? &r.body : nullptr;
        if (head || r.status == 204 || r.status == 304) {
            // no body
        } else if (r.header("transfer-encoding").find("chunked") != std::string::npos) {
            for (;;) {
                std::string line = read_line();
                std::uint64_t n = std::strtoull(line.c_str(), nullptr, 16);
                if (n == 0) {
                    while (!read_line().empty()) {}
                    break;
                }
                read_body(n, out, r);
                read_line();
            }
        } else if (!r.header("content-length").empty()) {
            read_body(std::strtoull(r.header("content-length").c_str(), nullptr, 10), out, r);
        } else {
            // Body delimited by close.
            if (out) out->append(buf_, pos_, std::string::npos);
            r.body_bytes += buf_.size() - pos_;
            pos_ = buf_.size();
            while (fill()) {
                if (out) out->append(buf_, pos_, std::string::npos);
                r.body_bytes += buf_.size() - pos_;
                pos_ = buf_.size();
            }
            close_after = true;
        }
        if (close_after) end();
        return r;
    }

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

// ---------------------------------------------------------------------------
// Registry operations

struct OpError : std::runtime_error {
    Failure kind;
    OpError(Failure k, const std::string& what) : std::runtime_error(what), kind(k) {}
};

void expect(const Response& r, std::initializer_list<int> ok, const std::string& what) {
    for (int s : ok)
        if (r.status == s) return;
    std::string body = r.body.substr(0, 200);
    for (auto& ch : body)
        if (ch == '\n' || ch == '\r') ch = ' ';
    throw OpError(Failure::status, what + ": HTTP " + std::to_string(r.status) + " " + body);
}

// Location header → request target (strip scheme and authority of an absolute URL).
std::string location_target(const Response& r, const std::string& what) {
    std::string loc = r.header("location");
    if (loc.empty()) throw OpError(Failure::status, what + ": no Location header");
    auto scheme = loc.find("://");
    if (scheme != std::string::npos) {
        auto slash = loc.find('/', scheme + 3);
        loc = slash == std::string::npos ? "/" : loc.substr(slash);
    }
    return loc;
}

std::string with_query(const std::string& target, const std::string& kv) {
    return target + (target.find('?') == std::string::npos ? "?" : "&") + kv;
}

struct Counters {
    std::atomic<std::uint64_t> status{0}, connection{0}, short_read{0}, verify{0};
    std::atomic<std::uint64_t> post_fallbacks{0};
    std::mutex mu;
    std::vector<std::string> samples;  // first few error messages
    void record(Failure kind, const std::string& msg) {
        switch (kind) {
            case Failure::status: ++status; break;
            case Failure::connection: ++connection; break;
            case Failure::short_read: ++short_read; break;
            case Failure::verify: ++verify; break;
            case Failure::none: break;
        }
        std::lock_guard lock(mu);
        if (samples.size() < 5) samples.push_back(msg);
    }
    std::uint64_t total() const { return status + connection + short_read + verify; }
};

struct Image {
    std::string repo, tag, blob_digest;
    std::uint64_t blob_size = 0;
};

class Client {
public:
    Client(const Endpoint& ep, const Options& o, SSL_CTX* tls, Counters& counters)
        : o_(o), conn_(ep, o.timeout, tls), counters_(counters) {}

    Conn& conn() { return conn_; }

    // GET /v2/, the spec's API version check.
    void api_version_check() {
        Request get;
        get.target = "/v2/";
        expect(conn_.request(get), {200}, "GET /v2/");
    }

    // Monolithic upload of a blob given as iovecs.
    void upload_monolithic(const std::string& repo, const std::string& digest, std::vector<iovec> body,
                           std::uint64_t len) {
        Request post;
        post.method = "POST";
        post.target = "/v2/" + repo + "/blobs/uploads/";
        Response r = conn_.request(post);
        expect(r, {202}, "POST upload");
        Request put;
        put.method = "PUT";
        put.target = with_query(location_target(r, "POST upload"), "digest=" + digest);
        put.headers = "Content-Type: application/octet-stream\r\n";
        put.body = std::move(body);
        put.body_len = len;
        r = conn_.request(put);
        expect(r, {201}, "PUT blob");
    }

    void upload_post(const std::string& repo, const std::string& digest, std::vector<iovec> body, std::uint64_t len) {
        Request post;
        post.method = "POST";
        post.target = "/v2/" + repo + "/blobs/uploads/?digest=" + digest;
        post.headers = "Content-Type: application/octet-stream\r\n";
        post.body = body;
        post.body_len = len;
        Response r = conn_.request(post);
        if (r.status == 201) return;
        expect(r, {202}, "POST upload ?digest=");
        ++counters_.post_fallbacks;  // single POST not supported: continue with PUT, as the spec says
        Request put;
        put.method = "PUT";
        put.target = with_query(location_target(r, "POST upload ?digest="), "digest=" + digest);
        put.headers = "Content-Type: application/octet-stream\r\n";
        put.body = std::move(body);
        put.body_len = len;
        r = conn_.request(put);
        expect(r, {201}, "PUT blob after POST ?digest=");
    }

    void upload_chunked(const std::string& repo, const BlobSet& set, const Blob& blob) {
        Request post;
        post.method = "POST";
        post.target = "/v2/" + repo + "/blobs/uploads/";
        Response r = conn_.request(post);
        expect(r, {202}, "POST upload");
        std::string loc = location_target(r, "POST upload");
        for (std::uint64_t off = 0; off < set.size(); off += o_.chunk) {
            std::uint64_t n = std::min(o_.chunk, set.size() - off);
            Request patch;
            patch.method = "PATCH";
            patch.target = loc;
            patch.headers = "Content-Type: application/octet-stream\r\nContent-Range: " + std::to_string(off) + "-" +
                            std::to_string(off + n - 1) + "\r\n";
            patch.body = set.range(blob, off, n);
            patch.body_len = n;
            r = conn_.request(patch);
            expect(r, {202}, "PATCH chunk");
            loc = location_target(r, "PATCH chunk");
        }
        Request put;
        put.method = "PUT";
        put.target = with_query(loc, "digest=" + blob.digest);
        r = conn_.request(put);
        expect(r, {201}, "PUT ?digest= (chunked)");
    }

    void put_manifest(const std::string& repo, const std::string& tag, const std::string& manifest) {
        Request put;
        put.method = "PUT";
        put.target = "/v2/" + repo + "/manifests/" + tag;
        put.headers = std::string("Content-Type: ") + kManifestType + "\r\n";
        put.body = {iovec{const_cast<char*>(manifest.data()), manifest.size()}};
        put.body_len = manifest.size();
        Response r = conn_.request(put);
        expect(r, {201}, "PUT manifest");
    }

    std::string get_manifest(const std::string& repo, const std::string& tag) {
        Request get;
        get.target = "/v2/" + repo + "/manifests/" + tag;
        get.headers = std::string("Accept: ") + kManifestType + "\r\n";
        Response r = conn_.request(get);
        expect(r, {200}, "GET manifest");
        return std::move(r.body);
    }

    void head_manifest(const std::string& repo, const std::string& tag) {
        Request head;
        head.method = "HEAD";
        head.target = "/v2/" + repo + "/manifests/" + tag;
        head.headers = std::string("Accept: ") + kManifestType + "\r\n";
        Response r = conn_.request(head, true);
        expect(r, {200}, "HEAD manifest");
        if (r.header("docker-content-digest").empty())
            throw OpError(Failure::verify, "HEAD manifest: no Docker-Content-Digest");
    }

    std::uint64_t get_blob(const std::string& repo, const std::string& digest, std::uint64_t expected) {
        Request get;
        get.target = "/v2/" + repo + "/blobs/" + digest;
        get.keep_body = false;
        Response r = conn_.request(get);
        expect(r, {200}, "GET blob");
        if (r.body_bytes != expected)
            throw OpError(Failure::verify,
                          "GET blob: " + std::to_string(r.body_bytes) + " bytes, expected " + std::to_string(expected));
        return r.body_bytes;
    }

    // Cross-repository mount (POST ?mount=&from=); a server that answers 202 (no mount)
    // gets the blob uploaded to the session it opened instead. True when it mounted.
    bool mount_blob(const std::string& repo, const std::string& from, const std::string& digest,
                    const std::string& content) {
        Request post;
        post.method = "POST";
        post.target = "/v2/" + repo + "/blobs/uploads/?mount=" + digest + "&from=" + from;
        Response r = conn_.request(post);
        if (r.status == 201) return true;
        expect(r, {202}, "POST mount");
        Request put;
        put.method = "PUT";
        put.target = with_query(location_target(r, "POST mount"), "digest=" + digest);
        put.headers = "Content-Type: application/octet-stream\r\n";
        put.body = {iovec{const_cast<char*>(content.data()), content.size()}};
        put.body_len = content.size();
        r = conn_.request(put);
        expect(r, {201}, "PUT blob after POST mount");
        return false;
    }

    std::string tags_list(const std::string& repo) {
        Request get;
        get.target = "/v2/" + repo + "/tags/list";
        Response r = conn_.request(get);
        expect(r, {200}, "GET tags/list");
        return std::move(r.body);
    }

private:
    const Options& o_;
    Conn conn_;
    Counters& counters_;
};

// The client context every https:// connection is made from; null for http://.
std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> make_tls_context(const Endpoint& ep, const Options& o) {
    std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> owner(nullptr, SSL_CTX_free);
    if (!ep.tls) return owner;
    owner.reset(SSL_CTX_new(TLS_client_method()));
    SSL_CTX* ctx = owner.get();
    if (!ctx) throw std::runtime_error("SSL_CTX_new" + tls_errors());
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    // A server closing without close_notify ends a body like one sending it; what a
    // cut-off body lacks shows in the byte counts.
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
    // Up to 256 KiB of records per recv instead of two recvs (header, rest) per
    // 16 KiB record: the generator shares the cores with the server.
    SSL_CTX_set_read_ahead(ctx, 1);
    SSL_CTX_set_default_read_buffer_len(ctx, 256 * 1024);
    if (o.insecure) {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
    } else {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
        int ok = o.cacert.empty() ? SSL_CTX_set_default_verify_paths(ctx)
                                  : SSL_CTX_load_verify_locations(ctx, o.cacert.c_str(), nullptr);
        if (ok != 1) throw std::invalid_argument("cannot load CA certificates " + o.cacert + tls_errors());
    }
    if (!o.ciphersuites.empty() && SSL_CTX_set_ciphersuites(ctx, o.ciphersuites.c_str()) != 1)
        throw std::invalid_argument("bad --tls-ciphersuites " + o.ciphersuites + tls_errors());
    if (o.resume) {
        // No shared cache: each connection keeps what it received (Conn::keep_session),
        // so a client resumes its own previous connection's session.
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
        SSL_CTX_sess_set_new_cb(ctx, Conn::keep_session);
    }
    return owner;
}

std::string make_manifest(const std::string& config_digest, std::uint64_t config_size, const std::string& layer_digest,
                          std::uint64_t layer_size) {
    std::string m;
    m.reserve(512);
    m += R"({"schemaVersion":2,"mediaType":")";
    m += kManifestType;
    m += R"(","config":{"mediaType":")";
    m += kConfigType;
    m += R"(","digest":")" + config_digest + R"(","size":)" + std::to_string(config_size);
    m += R"(},"layers":[{"mediaType":")";
    m += kLayerType;
    m += R"(","digest":")" + layer_digest + R"(","size":)" + std::to_string(layer_size) + "}]}";
    return m;
}

// First layer digest of a manifest (enough JSON handling for what we push).
std::string first_layer_digest(const std::string& manifest) {
    auto layers = manifest.find("\"layers\"");
    if (layers == std::string::npos) return {};
    auto key = manifest.find("\"digest\"", layers);
    if (key == std::string::npos) return {};
    auto q1 = manifest.find('"', manifest.find(':', key + 8));
    auto q2 = manifest.find('"', q1 + 1);
    if (q1 == std::string::npos || q2 == std::string::npos) return {};
    return manifest.substr(q1 + 1, q2 - q1 - 1);
}

// ---------------------------------------------------------------------------
// /proc sampling

struct ProcSample {
    double cpu_seconds = -1;
    std::uint64_t rss_kib = 0, hwm_kib = 0;
};

double proc_cpu_seconds(long pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    auto rp = text.rfind(')');
    if (rp == std::string::npos) return -1;
    std::istringstream in(text.substr(rp + 2));
    std::string field;
    std::vector<std::string> fields;
    while (in >> field) fields.push_back(field);
    // fields[0] is state (field 3); utime is field 14, stime field 15.
    if (fields.size() < 13) return -1;
    double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
    return (std::stod(fields[11]) + std::stod(fields[12])) / ticks;
}

std::uint64_t proc_status_kib(long pid, const char* key) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    std::size_t klen = std::strlen(key);
    while (std::getline(f, line))
        if (line.compare(0, klen, key) == 0 && line.size() > klen && line[klen] == ':')
            return std::strtoull(line.c_str() + klen + 1, nullptr, 10);
    return 0;
}

class Sampler {
public:
    explicit Sampler(long pid) : pid_(pid) {
        if (!pid_) return;
        max_rss_ = proc_status_kib(pid_, "VmRSS");
        thread_ = std::thread([this] {
            std::unique_lock lock(mu_);
            while (!stop_) {
                cv_.wait_for(lock, std::chrono::milliseconds(20));
                max_rss_ = std::max(max_rss_, proc_status_kib(pid_, "VmRSS"));
            }
        });
    }
    std::uint64_t finish() {
        if (!pid_) return 0;
        {
            std::lock_guard lock(mu_);
            stop_ = true;
        }
        cv_.notify_all();
        thread_.join();
        return std::max(max_rss_, proc_status_kib(pid_, "VmRSS"));
    }

private:
    long pid_;
    std::thread thread_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool stop_ = false;
    std::uint64_t max_rss_ = 0;
};

// ---------------------------------------------------------------------------
// The run

struct WorkerResult {
    std::vector<double> latencies_us;
    std::uint64_t ops = 0, bytes = 0;
};

std::string json_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else {
            out += c;
        }
    }
    return out;
}

double percentile(const std::vector<double>& sorted, double p) {
    if (sorted.empty()) return 0;
    double idx = p / 100.0 * (sorted.size() - 1);
    auto lo = static_cast<std::size_t>(std::floor(idx));
    auto hi = static_cast<std::size_t>(std::ceil(idx));
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (idx - lo);
}

// ---------------------------------------------------------------------------
// fill-manifests: many small distinct manifests, as fast as the server takes them

// Where manifest i of a fill goes, and what it holds. Deterministic, so that a fill
// can be grown in steps (--first) and a caller can name any manifest of it.
struct FillLayout {
    std::string prefix;
    std::uint64_t per_repo = 1;
    std::string config, layer;  // the two blobs every manifest shares
    std::string config_digest, layer_digest;

    FillLayout(const Options& o) : prefix(o.repo_prefix) {
        per_repo = std::max<std::uint64_t>(1, (o.total + o.repos - 1) / o.repos);
        config = R"({"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]},"fill":")" + prefix +
                 "\"}";
        layer.resize(1024);
        SplitMix{0x5eed}.fill(reinterpret_cast<unsigned char*>(layer.data()), layer.size());
        config_digest = sha256_digest(config.data(), config.size());
        layer_digest = sha256_digest(layer.data(), layer.size());
    }
    std::string repo_of_index(std::uint64_t r) const {
        char buf[32];
        std::snprintf(buf, sizeof buf, "/r%05llu", static_cast<unsigned long long>(r));
        return prefix + buf;
    }
    std::string repo(std::uint64_t i) const { return repo_of_index(i / per_repo); }
    static std::string tag(std::uint64_t i) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "t%07llu", static_cast<unsigned long long>(i));
        return buf;
    }
    // The shared config and layer, and an annotation that makes manifest i unlike any other.
    std::string manifest(std::uint64_t i) const {
        std::string m = make_manifest(config_digest, config.size(), layer_digest, layer.size());
        m.pop_back();  // the closing brace
        m += R"(,"annotations":{"org.example.fill":")" + std::to_string(i) + "\"}}";
        return m;
    }
};

int run_fill(const Options& o, const Endpoint& ep, SSL_CTX* tls) {
    const FillLayout fill(o);
    const std::uint64_t end_index = o.first + o.ops;
    // Repositories whose first manifest is in this run get the blobs; earlier ones have them.
    const std::uint64_t repo_lo = (o.first + fill.per_repo - 1) / fill.per_repo;
    const std::uint64_t repo_hi = (end_index + fill.per_repo - 1) / fill.per_repo;  // exclusive
    const std::string source_repo = fill.repo_of_index(0);

    Counters counters;
    std::vector<std::unique_ptr<Client>> clients;
    for (int i = 0; i < o.concurrency; ++i) clients.push_back(std::make_unique<Client>(ep, o, tls, counters));
    try {
        for (auto& c : clients) c->conn().connect();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "berth-bench: setup failed: %s\n", e.what());
        if (o.json)
            std::printf("{\"workload\":\"%s\",\"setup_error\":\"%s\"}\n", o.workload.c_str(),
                        json_escape(e.what()).c_str());
        return 1;
    }

    // An op that fails is tried twice more (on a new connection) before it counts; the
    // first one that still fails stops the fill, so that what was filled stays a prefix.
    std::atomic<bool> failed{false};
    auto attempt = [&](Client& c, auto&& op) {
        for (int tries = 1;; ++tries) {
            try {
                op();
                return true;
            } catch (const std::exception& e) {
                c.conn().close();
                if (tries < 3) {
                    std::this_thread::sleep_for(std::chrono::milliseconds(100 * tries));
                    continue;
                }
                const auto* op_error = dynamic_cast<const OpError*>(&e);
                const auto* net_error = dynamic_cast<const NetError*>(&e);
                counters.record(op_error    ? op_error->kind
                                : net_error ? net_error->kind
                                            : Failure::connection,
                                e.what());
                failed = true;
                return false;
            }
        }
    };

    double cpu0 = o.server_pid ? proc_cpu_seconds(o.server_pid) : -1;
    Sampler sampler(o.server_pid);
    const auto start = Clock::now();
    const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));

    // Phase 1: the shared blobs, pushed once into the fill's first repository, mounted into the others.
    std::atomic<std::uint64_t> mounted{0}, uploaded{0};
    if (repo_lo == 0 && repo_hi > 0) {
        Client& c = *clients[0];
        for (const std::string* blob : {&fill.config, &fill.layer})
            attempt(c, [&] {
                c.upload_post(source_repo, sha256_digest(blob->data(), blob->size()),
                              {iovec{const_cast<char*>(blob->data()), blob->size()}}, blob->size());
                ++uploaded;
            });
    }
    std::atomic<std::uint64_t> next_repo{std::max<std::uint64_t>(repo_lo, 1)};
    auto link_worker = [&](int id) {
        Client& c = *clients[id];
        while (!failed) {
            std::uint64_t r = next_repo.fetch_add(1);
            if (r >= repo_hi) break;
            const std::string repo = fill.repo_of_index(r);
            for (auto [digest, content] :
                 {std::pair{&fill.config_digest, &fill.config}, std::pair{&fill.layer_digest, &fill.layer}})
                attempt(c, [&] { ++(c.mount_blob(repo, source_repo, *digest, *content) ? mounted : uploaded); });
        }
    };
    {
        std::vector<std::thread> threads;
        for (int i = 0; i < o.concurrency; ++i) threads.emplace_back(link_worker, i);
        for (auto& t : threads) t.join();
    }
    const auto blobs_done = Clock::now();

    // Phase 2: the manifests, each PUT by its tag.
    std::atomic<std::uint64_t> next_op{o.first}, done{0};
    std::vector<WorkerResult> results(o.concurrency);
    auto manifest_worker = [&](int id) {
        Client& c = *clients[id];
        WorkerResult& res = results[id];
        res.latencies_us.reserve(o.ops / o.concurrency + 16);
        while (!failed) {
            if (o.seconds > 0 && Clock::now() >= deadline) break;
            std::uint64_t i = next_op.fetch_add(1);
            if (i >= end_index) break;
            const std::string m = fill.manifest(i);
            auto t0 = Clock::now();
            if (!attempt(c, [&] { c.put_manifest(fill.repo(i), FillLayout::tag(i), m); })) break;
            res.latencies_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
            ++res.ops;
            res.bytes += m.size();
            ++done;
        }
    };
    std::mutex progress_mu;
    std::condition_variable progress_cv;
    bool finished = false;
    std::thread progress;
    if (o.progress > 0)
        progress = std::thread([&] {
            std::unique_lock lock(progress_mu);
            auto last_t = Clock::now();
            std::uint64_t last_n = 0;
            while (!progress_cv.wait_for(lock, std::chrono::duration<double>(o.progress), [&] { return finished; })) {
                auto now = Clock::now();
                std::uint64_t n = done.load();
                std::fprintf(stderr, "  fill: %llu/%llu manifests, %.0f/s\n", static_cast<unsigned long long>(n),
                             static_cast<unsigned long long>(o.ops),
                             (n - last_n) / std::chrono::duration<double>(now - last_t).count());
                last_t = now;
                last_n = n;
            }
        });
    {
        std::vector<std::thread> threads;
        for (int i = 0; i < o.concurrency; ++i) threads.emplace_back(manifest_worker, i);
        for (auto& t : threads) t.join();
    }
    const auto end = Clock::now();
    if (progress.joinable()) {
        {
            std::lock_guard lock(progress_mu);
            finished = true;
        }
        progress_cv.notify_all();
        progress.join();
    }
    const std::uint64_t max_rss_kib = sampler.finish();
    const double cpu = o.server_pid && cpu0 >= 0 ? proc_cpu_seconds(o.server_pid) - cpu0 : -1;
    const std::uint64_t hwm_kib = o.server_pid ? proc_status_kib(o.server_pid, "VmHWM") : 0;

    std::vector<double> lat;
    std::uint64_t ops = 0, bytes = 0;
    for (auto& r : results) {
        lat.insert(lat.end(), r.latencies_us.begin(), r.latencies_us.end());
        ops += r.ops;
        bytes += r.bytes;
    }
    std::sort(lat.begin(), lat.end());
    const double seconds = std::chrono::duration<double>(end - start).count();
    const double blob_seconds = std::chrono::duration<double>(blobs_done - start).count();
    const double manifest_seconds = std::chrono::duration<double>(end - blobs_done).count();
    // Manifests filled form the prefix first .. next-1 (a failure stops every worker).
    const std::uint64_t next = o.first + ops;
    const double p50 = percentile(lat, 50) / 1000, p99 = percentile(lat, 99) / 1000;
    const double pmax = lat.empty() ? 0 : lat.back() / 1000;
    const std::uint64_t errors = counters.total();
    if (!o.quiet) {
        std::printf("workload fill-manifests  concurrency %d  url %s\n", o.concurrency, o.url.c_str());
        std::printf(
            "  repositories %llu-%llu of %llu (%llu manifests each): blobs mounted %llu, uploaded %llu in %.2f s\n",
            static_cast<unsigned long long>(repo_lo), static_cast<unsigned long long>(repo_hi),
            static_cast<unsigned long long>(o.repos), static_cast<unsigned long long>(fill.per_repo),
            static_cast<unsigned long long>(mounted.load()), static_cast<unsigned long long>(uploaded.load()),
            blob_seconds);
        std::printf(
            "  manifests %llu (%llu..%llu) in %.2f s  %.1f/s (%.1f/s with the blobs)  PUT p50 %.3f ms  p99 %.3f ms  "
            "max %.3f ms\n",
            static_cast<unsigned long long>(ops), static_cast<unsigned long long>(o.first),
            static_cast<unsigned long long>(next), manifest_seconds, ops / manifest_seconds, ops / seconds, p50, p99,
            pmax);
        std::printf("  errors %llu\n", static_cast<unsigned long long>(errors));
        for (auto& s : counters.samples) std::printf("    error: %s\n", s.c_str());
        if (o.server_pid)
            std::printf("  server pid %ld: cpu %.2f s (%.1f µs per manifest)  max VmRSS %.1f MiB  VmHWM %.1f MiB\n",
                        o.server_pid, cpu, ops ? cpu * 1e6 / ops : 0, max_rss_kib / 1024.0, hwm_kib / 1024.0);
    }
    if (o.json) {
        std::string samples;
        for (auto& s : counters.samples) samples += (samples.empty() ? "\"" : ",\"") + json_escape(s) + "\"";
        std::printf(
            "{\"workload\":\"fill-manifests\",\"concurrency\":%d,\"repos\":%llu,\"per_repo\":%llu,"
            "\"repo_prefix\":\"%s\",\"first\":%llu,\"next\":%llu,\"ops\":%llu,\"bytes\":%llu,\"seconds\":%.4f,"
            "\"blob_seconds\":%.4f,\"manifest_seconds\":%.4f,\"repos_linked\":%llu,\"blobs_mounted\":%llu,"
            "\"blobs_uploaded\":%llu,\"ops_per_s\":%.3f,\"p50_ms\":%.4f,\"p99_ms\":%.4f,\"max_ms\":%.4f,"
            "\"errors\":%llu,\"server_cpu_s\":%.4f,\"server_max_rss_kib\":%llu,\"server_vmhwm_kib\":%llu,"
            "\"error_samples\":[%s]}\n",
            o.concurrency, static_cast<unsigned long long>(o.repos), static_cast<unsigned long long>(fill.per_repo),
            json_escape(fill.prefix).c_str(), static_cast<unsigned long long>(o.first),
            static_cast<unsigned long long>(next), static_cast<unsigned long long>(ops),
            static_cast<unsigned long long>(bytes), seconds, blob_seconds, manifest_seconds,
            static_cast<unsigned long long>(repo_hi - repo_lo), static_cast<unsigned long long>(mounted.load()),
            static_cast<unsigned long long>(uploaded.load()), manifest_seconds > 0 ? ops / manifest_seconds : 0, p50,
            p99, pmax, static_cast<unsigned long long>(errors), cpu, static_cast<unsigned long long>(max_rss_kib),
            static_cast<unsigned long long>(hwm_kib), samples.c_str());
    }
    std::fflush(stdout);
    return errors ? 3 : 0;
}

int run(const Options& o) {
    Endpoint ep = parse_url(o.url);
    auto tls = make_tls_context(ep, o);  // before the clients: their connections use it
    if (o.workload == "fill-manifests") return run_fill(o, ep, tls.get());
    std::random_device rd;
    std::uint64_t seed = (static_cast<std::uint64_t>(rd()) << 32) ^ rd() ^
                         static_cast<std::uint64_t>(Clock::now().time_since_epoch().count());
    char runid[16];
    std::snprintf(runid, sizeof runid, "%08llx",
                  static_cast<unsigned long long>(SplitMix{seed}.next() & 0xffffffffull));
    const std::string base = std::string("bench-") + runid;
    const std::string& w = o.workload;
    const bool is_push = w.rfind("push-", 0) == 0;
    const bool is_pull = w == "pull";
    const bool is_mixed = w == "mixed";
    const bool is_manifest = w == "manifest-get" || w == "manifest-head";
    const bool is_tags = w == "tags-list";
    const bool moves_blobs = is_push || is_pull || is_mixed;

    Counters counters;
    auto setup_fail = [&](const std::exception& e) {
        std::fprintf(stderr, "berth-bench: setup failed: %s\n", e.what());
        if (o.json)
            std::printf("{\"workload\":\"%s\",\"setup_error\":\"%s\"}\n", w.c_str(), json_escape(e.what()).c_str());
        return 1;
    };

    // Content for every blob, digests included, before the clock starts.
    std::unique_ptr<BlobSet> blobs;
    std::vector<Blob> plan;  // pushed during the run, indexed by op number
    std::uint64_t planned = 0;
    if (moves_blobs || is_manifest || is_tags) {
        std::uint64_t sz = moves_blobs ? o.size : std::min<std::uint64_t>(o.size, 4096);
        blobs = std::make_unique<BlobSet>(sz, seed);
    }
    if (is_push || is_mixed) {
        if (o.ops) planned = o.ops;
        else {
            double bound = o.seconds * (8.0 * GiB) / static_cast<double>(o.size) + 1000;
            planned = static_cast<std::uint64_t>(std::min(bound, 2e6));
        }
        plan.reserve(planned);
        for (std::uint64_t i = 0; i < planned; ++i) plan.push_back(blobs->make());
    }

    // Setup: connections, config blobs, images to pull, manifests to get, tags to list.
    std::vector<std::unique_ptr<Client>> clients;
    for (int i = 0; i < o.concurrency; ++i) clients.push_back(std::make_unique<Client>(ep, o, tls.get(), counters));
    const std::string config_json =
        std::string(R"({"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]},"bench":")") +
        runid + "\"}";
    const std::string config_digest = sha256_digest(config_json.data(), config_json.size());
    auto push_config = [&](Client& c, const std::string& repo) {
        c.upload_monolithic(repo, config_digest, {iovec{const_cast<char*>(config_json.data()), config_json.size()}},
                            config_json.size());
    };
    std::vector<std::string> worker_repo(o.concurrency);
    std::vector<Image> images;
    const std::string shared_repo = base + "/shared";
    try {
        for (int i = 0; i < o.concurrency; ++i) {
            clients[i]->conn().connect();
            if (is_push || is_mixed) {
                worker_repo[i] = base + "/w" + std::to_string(i);
                push_config(*clients[i], worker_repo[i]);
            }
        }
        Client& c0 = *clients[0];
        if (is_pull || is_mixed || is_manifest || is_tags) push_config(c0, shared_repo);
        if (is_pull || is_mixed) {
            int n = o.images;
            if (n <= 0) n = static_cast<int>(std::clamp<std::uint64_t>((256 * MiB + o.size - 1) / o.size, 1, 32));
            for (int k = 0; k < n; ++k) {
                Blob b = blobs->make();
                c0.upload_monolithic(shared_repo, b.digest, blobs->range(b, 0, blobs->size()), blobs->size());
                Image img{shared_repo, "pull-" + std::to_string(k), b.digest, blobs->size()};
                c0.put_manifest(shared_repo, img.tag,
                                make_manifest(config_digest, config_json.size(), b.digest, blobs->size()));
                images.push_back(img);
            }
            // Each blob is read once before the clock starts, so pulls measure serving and not the
            // disk: berth's uploads bypass the page cache, Distribution's go through it.
            for (const auto& img : images) c0.get_blob(img.repo, img.blob_digest, img.blob_size);
        }
        if (is_manifest || is_tags) {
            Blob b = blobs->make();
            c0.upload_monolithic(shared_repo, b.digest, blobs->range(b, 0, blobs->size()), blobs->size());
            std::string m = make_manifest(config_digest, config_json.size(), b.digest, blobs->size());
            c0.put_manifest(shared_repo, "latest", m);
            if (is_tags)
                for (int t = 1; t < o.tags; ++t) c0.put_manifest(shared_repo, "tag-" + std::to_string(t), m);
            images.push_back(Image{shared_repo, "latest", b.digest, blobs->size()});
        }
        // --reconnect: every timed op opens its own connection. The setup's are closed
        // once each has made a request, so that over TLS its session has arrived.
        if (o.reconnect)
            for (auto& c : clients) {
                c->api_version_check();
                c->conn().end();
            }
    } catch (const std::exception& e) {
        return setup_fail(e);
    }
    if (o.setup_only) {
        std::printf(
            "{\"repo\":\"%s\",\"tag\":\"%s\",\"manifest_path\":\"/v2/%s/manifests/%s\",\"tags_path\":\"/v2/%s/tags/"
            "list\"}\n",
            shared_repo.c_str(), images.empty() ? "" : images[0].tag.c_str(), shared_repo.c_str(),
            images.empty() ? "" : images[0].tag.c_str(), shared_repo.c_str());
        return 0;
    }

    // The timed part.
    std::atomic<std::uint64_t> next_op{0};
    std::atomic<bool> plan_exhausted{false};
    std::vector<WorkerResult> results(o.concurrency);
    const auto seconds = std::chrono::duration<double>(o.seconds);

    for (auto& c : clients) c->conn().stats = {};  // count the timed part's connections only
    double cpu0 = o.server_pid ? proc_cpu_seconds(o.server_pid) : -1;
    Sampler sampler(o.server_pid);
    const auto start = Clock::now();
    const auto deadline = start + std::chrono::duration_cast<Clock::duration>(seconds);

    auto worker = [&](int id) {
        Client& c = *clients[id];
        WorkerResult& res = results[id];
        res.latencies_us.reserve(o.ops ? o.ops / o.concurrency + 16 : 100000);
        std::uint64_t tagno = 0;
        for (;;) {
            if (o.seconds > 0 && Clock::now() >= deadline) break;
            std::uint64_t i = next_op.fetch_add(1);
            if (o.ops && i >= o.ops) break;
            const bool push_op = is_push || (is_mixed && i % 2 == 0);
            if (push_op && i >= plan.size()) {
                plan_exhausted = true;
                break;
            }
            auto t0 = Clock::now();
            std::uint64_t moved = 0;
            try {
                if (push_op) {
                    const Blob& b = plan[i];
                    const std::string& repo = worker_repo[id];
                    if (w == "push-chunked") c.upload_chunked(repo, *blobs, b);
                    else if (w == "push-post")
                        c.upload_post(repo, b.digest, blobs->range(b, 0, blobs->size()), blobs->size());
                    else c.upload_monolithic(repo, b.digest, blobs->range(b, 0, blobs->size()), blobs->size());
                    c.put_manifest(repo, "t" + std::to_string(tagno++),
                                   make_manifest(config_digest, config_json.size(), b.digest, blobs->size()));
                    moved = blobs->size();
                } else if (is_pull || is_mixed) {
                    const Image& img = images[(i / (is_mixed ? 2 : 1) + id) % images.size()];
                    std::string m = c.get_manifest(img.repo, img.tag);
                    std::string d = first_layer_digest(m);
                    if (d != img.blob_digest)
                        throw OpError(Failure::verify, "manifest names layer " + d + ", expected " + img.blob_digest);
                    moved = c.get_blob(img.repo, d, img.blob_size);
                } else if (w == "manifest-get") {
                    std::string m = c.get_manifest(images[0].repo, images[0].tag);
                    if (m.empty()) throw OpError(Failure::verify, "empty manifest");
                    moved = m.size();
                } else if (w == "manifest-head") {
                    c.head_manifest(images[0].repo, images[0].tag);
                } else if (is_tags) {
                    std::string body = c.tags_list(shared_repo);
                    if (body.find("\"latest\"") == std::string::npos)
                        throw OpError(Failure::verify, "tags list lacks latest");
                    moved = body.size();
                }
                auto t1 = Clock::now();
                res.latencies_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
                ++res.ops;
                res.bytes += moved;
            } catch (const OpError& e) {
                counters.record(e.kind, e.what());
            } catch (const NetError& e) {
                counters.record(e.kind, e.what());
                c.conn().close();
            } catch (const std::exception& e) {
                counters.record(Failure::connection, e.what());
                c.conn().close();
            }
            if (o.reconnect) c.conn().end();
        }
    };
    std::vector<std::thread> threads;
    for (int i = 0; i < o.concurrency; ++i) threads.emplace_back(worker, i);
    for (auto& t : threads) t.join();
    const auto end = Clock::now();
    const std::uint64_t max_rss_kib = sampler.finish();
    double cpu1 = o.server_pid ? proc_cpu_seconds(o.server_pid) : -1;
    std::uint64_t hwm_kib = o.server_pid ? proc_status_kib(o.server_pid, "VmHWM") : 0;

    std::vector<double> lat;
    std::uint64_t ops = 0, bytes = 0;
    for (auto& r : results) {
        lat.insert(lat.end(), r.latencies_us.begin(), r.latencies_us.end());
        ops += r.ops;
        bytes += r.bytes;
    }
    Conn::Stats conns;
    for (auto& c : clients) {
        conns.connections += c->conn().stats.connections;
        conns.resumed += c->conn().stats.resumed;
        conns.full += c->conn().stats.full;
    }
    const std::string negotiated = clients[0]->conn().negotiated();
    std::sort(lat.begin(), lat.end());
    const double elapsed = std::chrono::duration<double>(end - start).count();
    const double ops_s = ops / elapsed;
    const double mib_s = bytes / elapsed / MiB;
    const double p50 = percentile(lat, 50) / 1000, p90 = percentile(lat, 90) / 1000, p99 = percentile(lat, 99) / 1000;
    const double pmax = lat.empty() ? 0 : lat.back() / 1000;
    const double cpu = (o.server_pid && cpu0 >= 0 && cpu1 >= 0) ? cpu1 - cpu0 : -1;
    const double cpu_per_gib = (cpu >= 0 && bytes > 0) ? cpu / (static_cast<double>(bytes) / GiB) : -1;
    const double cpu_us_per_op = (cpu >= 0 && ops > 0) ? cpu * 1e6 / ops : -1;
    const std::uint64_t errors = counters.total();

    if (!o.quiet) {
        std::printf("workload %s  size %llu  concurrency %d  url %s\n", w.c_str(),
                    static_cast<unsigned long long>(o.size), o.concurrency, o.url.c_str());
        std::printf(
            "  ops %llu in %.2f s  %.1f ops/s  %.1f MiB/s  latency p50 %.3f ms  p90 %.3f ms  p99 %.3f ms  max %.3f "
            "ms\n",
            static_cast<unsigned long long>(ops), elapsed, ops_s, mib_s, p50, p90, p99, pmax);
        std::printf("  errors %llu (status %llu, connection %llu, short read %llu, verify %llu)",
                    static_cast<unsigned long long>(errors), static_cast<unsigned long long>(counters.status.load()),
                    static_cast<unsigned long long>(counters.connection.load()),
                    static_cast<unsigned long long>(counters.short_read.load()),
                    static_cast<unsigned long long>(counters.verify.load()));
        if (counters.post_fallbacks)
            std::printf("  single-POST fallbacks %llu",
                        static_cast<unsigned long long>(counters.post_fallbacks.load()));
        std::printf("\n");
        for (auto& s : counters.samples) std::printf("    error: %s\n", s.c_str());
        if (ep.tls)
            std::printf("  %s  connections opened %llu%s  TLS handshakes: resumed %llu, full %llu%s\n",
                        negotiated.c_str(), static_cast<unsigned long long>(conns.connections),
                        o.reconnect ? " (one per op)" : "", static_cast<unsigned long long>(conns.resumed),
                        static_cast<unsigned long long>(conns.full), o.resume ? "" : " (--no-resume)");
        else if (conns.connections)
            std::printf("  connections opened %llu%s\n", static_cast<unsigned long long>(conns.connections),
                        o.reconnect ? " (one per op)" : "");
        if (plan_exhausted)
            std::printf("  note: the pre-generated blob plan ran out (%llu blobs)\n",
                        static_cast<unsigned long long>(planned));
        if (o.server_pid)
            std::printf(
                "  server pid %ld: cpu %.2f s (%.1f%% of one core)  cpu-s/GiB %.2f  cpu us/op %.1f  max VmRSS %.1f MiB "
                " VmHWM %.1f MiB\n",
                o.server_pid, cpu, elapsed > 0 ? 100 * cpu / elapsed : 0, cpu_per_gib, cpu_us_per_op,
                max_rss_kib / 1024.0, hwm_kib / 1024.0);
    }
    if (o.json) {
        std::string samples;
        for (auto& s : counters.samples) samples += (samples.empty() ? "\"" : ",\"") + json_escape(s) + "\"";
        std::printf(
            "{\"workload\":\"%s\",\"size\":%llu,\"concurrency\":%d,\"ops\":%llu,\"bytes\":%llu,\"seconds\":%.4f,"
            "\"ops_per_s\":%.3f,\"mib_per_s\":%.3f,\"p50_ms\":%.4f,\"p90_ms\":%.4f,\"p99_ms\":%.4f,\"max_ms\":%.4f,"
            "\"errors\":%llu,\"errors_status\":%llu,\"errors_connection\":%llu,\"errors_short_read\":%llu,"
            "\"errors_verify\":%llu,\"post_fallbacks\":%llu,\"plan_exhausted\":%s,\"server_cpu_s\":%.4f,"
            "\"server_cpu_s_per_gib\":%.4f,\"server_cpu_us_per_op\":%.3f,\"server_max_rss_kib\":%llu,"
            "\"server_vmhwm_kib\":%llu,\"tls\":%s,\"tls_negotiated\":\"%s\",\"reconnect\":%s,\"resume\":%s,"
            "\"connections\":%llu,"
            "\"handshakes_resumed\":%llu,\"handshakes_full\":%llu,\"error_samples\":[%s]}\n",
            w.c_str(), static_cast<unsigned long long>(o.size), o.concurrency, static_cast<unsigned long long>(ops),
            static_cast<unsigned long long>(bytes), elapsed, ops_s, mib_s, p50, p90, p99, pmax,
            static_cast<unsigned long long>(errors), static_cast<unsigned long long>(counters.status.load()),
            static_cast<unsigned long long>(counters.connection.load()),
            static_cast<unsigned long long>(counters.short_read.load()),
            static_cast<unsigned long long>(counters.verify.load()),
            static_cast<unsigned long long>(counters.post_fallbacks.load()), plan_exhausted ? "true" : "false", cpu,
            cpu_per_gib, cpu_us_per_op, static_cast<unsigned long long>(max_rss_kib),
            static_cast<unsigned long long>(hwm_kib), ep.tls ? "true" : "false", negotiated.c_str(),
            o.reconnect ? "true" : "false", o.resume ? "true" : "false",
            static_cast<unsigned long long>(conns.connections), static_cast<unsigned long long>(conns.resumed),
            static_cast<unsigned long long>(conns.full), samples.c_str());
    }
    std::fflush(stdout);
    return errors ? 3 : 0;
}

}  // namespace

int main(int argc, char** argv) {
    signal(SIGPIPE, SIG_IGN);
    try {
        return run(parse_options(argc, argv));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "berth-bench: %s\n", e.what());
        return 2;
    }
}
