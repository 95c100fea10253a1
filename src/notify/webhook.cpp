// Deliveries over HTTP(S) (webhook.hpp).
#include "webhook.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "berth/net/host_port.hpp"
#include "berth/oci/encoding.hpp"

namespace berth::notify {
namespace {

net::ClientOptions client_options(const Endpoint& endpoint) {
    net::ClientOptions options;
    options.background = true;
    const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(endpoint.timeout);
    options.connect_timeout = std::min(timeout, std::chrono::milliseconds(5000));
    options.header_timeout = timeout;
    options.idle_timeout = timeout;
    options.max_idle_per_origin = 1;  // one connection, kept while answers come without a body
    return options;
}

std::optional<std::chrono::seconds> retry_after(const std::string& value) {
    std::uint64_t seconds = 0;
    auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), seconds);
    if (error != std::errc() || end != value.data() + value.size()) return std::nullopt;  // dates: our backoff
    return std::chrono::seconds(std::min<std::uint64_t>(seconds, 3600));
}

}  // namespace

std::string signature(const std::string& secret, std::uint64_t unix_seconds, const std::string& body) {
    const auto signed_text = std::to_string(unix_seconds) + "." + body;
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
         reinterpret_cast<const unsigned char*>(signed_text.data()), signed_text.size(), mac, &length);
    return "t=" + std::to_string(unix_seconds) + ",sha256=" + oci::hex({reinterpret_cast<const char*>(mac), length});
}

Webhook::Webhook(const Endpoint& endpoint) : endpoint_(endpoint), client_(client_options(endpoint)) {
    const auto url = net::parse_url(endpoint.url);
    origin_.address = url.address;
    origin_.tls = {url.tls, endpoint.ca_file, endpoint.insecure, {}, {}, {}};
    target_ = url.path_prefix.empty() ? "/" : url.path_prefix;
}

Outcome Webhook::deliver(const std::vector<Notice>& notices) {
    std::string body, type;
    if (endpoint_.format == Format::distribution) {
        body = distribution_json(notices);
        type = "application/vnd.docker.distribution.events.v1+json";
    } else if (endpoint_.max_batch > 1) {
        body = cloudevents_batch_json(notices);
        type = "application/cloudevents-batch+json";
    } else {
        body = cloudevent_json(notices.front());
        type = "application/cloudevents+json";
    }
    net::RequestHead head{"POST", target_, {{"Content-Type", type}, {"User-Agent", "berth"}}, body.size(), true, {}};
    for (auto& header : endpoint_.headers) head.headers.push_back(header);
    if (!endpoint_.secret.empty()) {
        const auto now =
            std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                .count();
        head.headers.emplace_back("Berth-Signature", signature(endpoint_.secret, now, body));
    }
    Outcome out;
    try {
        // The answer's body is never read: its status is the whole answer, and a receiver that
        // sends a gigabyte or drips one byte a minute costs nothing once the head is in. An answer
        // without a body (204, Content-Length: 0) is complete, and its connection is kept.
        auto exchange = client_.open(origin_, std::move(head));
        exchange->write(body);
        exchange->end_request();
        const auto& answer = exchange->read_head();
        if (answer.status == 204 || answer.content_length == std::optional<std::uint64_t>(0)) {
            char end;
            exchange->read_body({&end, 1});
        }
        if (answer.status >= 200 && answer.status < 300) {
            out.kind = Outcome::Kind::delivered;
            return out;
        }
        const auto status = answer.status;
        out.kind = status == 410                                                      ? Outcome::Kind::gone
                   : status == 400 || status == 413 || status == 415 || status == 422 ? Outcome::Kind::refused
                                                                                      : Outcome::Kind::failed;
        out.detail = "answered " + std::to_string(answer.status);
        if (answer.status >= 300 && answer.status < 400) out.detail += " (redirects are not followed)";
        if (answer.status == 429 || answer.status == 503) out.retry_after = retry_after(answer.header("Retry-After"));
    } catch (const std::exception& error) {
        // The client's message names the target, whose path may be the receiver's secret (a
        // chat service's webhook URL): errors, logs and the status view say the endpoint's name.
        out.detail = error.what();
        for (auto at = out.detail.find(target_); at != std::string::npos && target_ != "/";
             at = out.detail.find(target_, at))
            out.detail.replace(at, target_.size(), "/…");
    }
    return out;
}

}  // namespace berth::notify
