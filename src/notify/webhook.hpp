#pragma once
// One delivery to an endpoint, and what its answer means. For an HTTP(S) receiver: the body in the
// endpoint's format, its headers and signature. The receiver is an outside party: its answer's head is
// read within the endpoint's timeout and its body never is, and a redirect is not followed.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "berth/net/client.hpp"
#include "berth/notify/options.hpp"
#include "notice.hpp"

namespace berth::notify {

struct Outcome {
    enum class Kind {
        delivered,  // 2xx
        failed,     // anything else: retried with backoff until the event's max_age
        refused,    // 400, 413, 415, 422: the receiver will never take these events; dead-lettered
        gone,       // 410: the endpoint is disabled until re-enabled
    };
    Kind kind = Kind::failed;
    std::string detail;
    std::optional<std::chrono::seconds> retry_after;  // a 429's or 503's Retry-After, at most an hour
};

// Where an endpoint's events go: an HTTP(S) receiver (webhook.cpp) or a NATS JetStream stream
// (nats_sink.cpp). Called from the endpoint's own thread only.
class Sink {
public:
    virtual ~Sink() = default;
    virtual Outcome deliver(const std::vector<Notice>& notices) = 0;
};
std::unique_ptr<Sink> make_sink(const Endpoint& endpoint);

// "t=<unix seconds>,sha256=<hex HMAC-SHA256 over "<t>.<body>">".
std::string signature(const std::string& secret, std::uint64_t unix_seconds, const std::string& body);

class Webhook final : public Sink {
public:
    explicit Webhook(const Endpoint& endpoint);
    Outcome deliver(const std::vector<Notice>& notices) override;

private:
    const Endpoint& endpoint_;
    net::Client client_;
    net::Origin origin_;
    std::string target_;
};

}  // namespace berth::notify
