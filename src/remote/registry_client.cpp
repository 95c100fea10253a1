#include "berth/remote/registry_client.hpp"

#include <algorithm>
#include <boost/algorithm/string/predicate.hpp>

#include "berth/net/resolve.hpp"
#include "berth/oci/encoding.hpp"
#include "berth/oci/media_types.hpp"
#include "berth/remote/challenge.hpp"
#include "berth/remote/token.hpp"
#include "address_book.hpp"

namespace berth::remote {
namespace {

using Clock = std::chrono::steady_clock;

// How long an address that failed to connect is skipped, so that a miss while
// an upstream is down answers at once instead of waiting out a connect timeout.
constexpr auto down_for = std::chrono::seconds(2);
constexpr auto resolve_every = std::chrono::seconds(10);
constexpr int max_redirects = 5;

// An absolute URL, possibly with a query (token realms, redirect targets), as origin and target.
struct Location {
    net::Url url;
    std::string target;
};

Location parse_location(const std::string& text) {
    auto scheme_end = text.find("://");
    if (scheme_end == std::string::npos) throw std::invalid_argument("not an absolute URL");
    auto path_start = text.find_first_of("/?", scheme_end + 3);
    Location out{net::parse_url(text.substr(0, path_start)),
                 path_start == std::string::npos ? "/" : text.substr(path_start)};
    if (out.target.front() == '?') out.target.insert(0, "/");
    return out;
}

bool is_redirect(int status) {
    return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

[[noreturn]] void too_slow() {
    throw net::Error(net::Error::Kind::timeout, "no whole answer within the upstream's fetch_timeout_seconds");
}

// The head timeout of a request that must be done by `deadline`.
std::chrono::milliseconds head_timeout(Clock::time_point deadline, std::chrono::milliseconds answer_timeout) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left <= std::chrono::milliseconds(0)) too_slow();
    return std::min(left, answer_timeout);
}

// A whole small body, at most `limit` bytes, by `deadline`: each read returns
// within the client's idle timeout, so a trickle is caught between reads.
std::string read_all(net::Exchange& exchange, const net::ResponseHead& head, std::size_t limit,
                     Clock::time_point deadline) {
    auto too_large = [&] {
        throw net::Error(net::Error::Kind::too_large, "response larger than " + std::to_string(limit) + " bytes");
    };
    if (head.content_length && *head.content_length > limit) too_large();
    std::string body;
    char buffer[16384];
    while (auto n = exchange.read_body(buffer)) {
        if (body.size() + n > limit) too_large();
        body.append(buffer, n);
        if (Clock::now() > deadline) too_slow();
    }
    return body;
}

}  // namespace

const net::Headers& accept_manifests() {
    static const net::Headers accept{{"Accept", std::string(oci::media_type::oci_manifest) + ", " +
                                                    std::string(oci::media_type::oci_index) + ", " +
                                                    std::string(oci::media_type::docker_manifest) + ", " +
                                                    std::string(oci::media_type::docker_manifest_list)}};
    return accept;
}

RegistryClient::RegistryClient(net::Client& client, Config config) : client_(client), config_(std::move(config)) {}

RegistryClient::Slot::Slot(RegistryClient& remote, Clock::time_point deadline) : remote_(remote) {
    std::unique_lock lock(remote_.mutex_);
    if (!remote_.slot_freed_.wait_until(lock, deadline,
                                        [&] { return remote_.busy_ < std::max(1u, remote_.config_.max_concurrent); }))
        throw net::Error(net::Error::Kind::timeout, "every connection to the upstream stayed busy");
    ++remote_.busy_;
}

RegistryClient::Slot::~Slot() {
    {
        std::lock_guard lock(remote_.mutex_);
        --remote_.busy_;
    }
    remote_.slot_freed_.notify_one();
}

std::vector<std::shared_ptr<RegistryClient::Address>> RegistryClient::candidates() {
    const auto now = Clock::now();
    bool stale;
    {
        std::lock_guard lock(mutex_);
        stale = addresses_.empty() || now - resolved_at_ > resolve_every;
    }
    if (stale) {
        // A name may stand for several replicas (a headless Service): every address is a
        // candidate. Resolved without the lock: DNS must not hold up this upstream's requests.
        std::vector<std::pair<net::Origin, std::string>> resolved;
        for (auto& url : config_.urls) {
            auto tls = config_.tls;
            tls.enabled = url.tls;
            if (tls.server_name.empty()) tls.server_name = url.address.host;
            auto addresses = net::resolve(url.address);
            if (!config_.address_book.empty()) {
                // The certificate is still checked against the name: a remembered address
                // reaches only a server that proves it is the one named.
                if (!addresses.empty()) remember(config_.address_book, url_key(url), addresses);
                else if (!(addresses = recall(config_.address_book, url_key(url))).empty()) ++remembered_;
            }
            for (auto& address : addresses) resolved.push_back({{address, tls}, url.path_prefix});
        }
        std::lock_guard lock(mutex_);
        if (!resolved.empty() || addresses_.empty()) {
            std::vector<std::shared_ptr<Address>> fresh;
            for (auto& [origin, prefix] : resolved) {
                auto entry = std::make_shared<Address>(Address{origin, prefix});
                for (auto& old : addresses_)  // keep what we knew of it
                    if (old->origin.address == origin.address && old->prefix == prefix)
                        entry->down_until = old->down_until;
                fresh.push_back(std::move(entry));
            }
            addresses_ = std::move(fresh);
            resolved_at_ = now;
        }
    }
    std::lock_guard lock(mutex_);
    std::vector<std::shared_ptr<Address>> up;
    for (auto& address : addresses_)
        if (address->down_until <= now) up.push_back(address);
    return up;
}

std::string RegistryClient::authorization(const std::string& scope) {
    std::lock_guard lock(mutex_);
    if (auto it = tokens_.find(scope); it != tokens_.end()) {
        if (it->second.expires > Clock::now()) return "Bearer " + it->second.value;
        tokens_.erase(it);
    }
    if (basic_ && !config_.username.empty()) return "Basic " + oci::base64(config_.username + ":" + config_.password);
    return {};
}

// Not a string prefix: an entry names a scheme, host and port exactly and a path the realm is at
// or below, so "https://auth.docker.io" lets no "https://auth.docker.io.evil.example" through,
// nor "http://h:80" a "http://h:8080". Without entries any realm will do, but never one without
// TLS for a registry reached with it: the credentials would cross the network in the clear.
bool RegistryClient::realm_allowed(const std::string& realm) const {
    Location asked;
    try {
        asked = parse_location(realm);
    } catch (const std::invalid_argument&) {
        return false;
    }
    if (config_.token_realms.empty())
        return asked.url.tls ||
               std::none_of(config_.urls.begin(), config_.urls.end(), [](const net::Url& url) { return url.tls; });
    const auto path = asked.target.substr(0, asked.target.find('?'));
    return std::any_of(config_.token_realms.begin(), config_.token_realms.end(), [&](const std::string& entry) {
        const auto allowed = parse_location(entry);  // the configuration checked it
        const auto prefix = allowed.target.substr(0, allowed.target.find('?'));
        if (allowed.url.tls != asked.url.tls || allowed.url.address.port != asked.url.address.port ||
            !boost::iequals(allowed.url.address.host, asked.url.address.host))
            return false;
        return prefix.ends_with('/') ? path.starts_with(prefix) : path == prefix || path.starts_with(prefix + "/");
    });
}

bool RegistryClient::answer_challenge(const std::string& text, const std::string& scope, Clock::time_point until) {
    // A token is a few hundred bytes: its realm answers within a minute, whatever the request allows.
    const auto deadline = std::min(until, Clock::now() + std::chrono::minutes(1));
    auto challenge = parse_challenge(text);
    if (challenge.scheme == "basic") {
        std::lock_guard lock(mutex_);
        if (config_.username.empty() || basic_) return false;  // nothing to offer, or refused already
        basic_ = true;
        return true;
    }
    if (challenge.scheme != "bearer" || challenge.params["realm"].empty()) return false;
    // The docker token flow sends the upstream's credentials wherever it
    // says; token_realms pins where that may be.
    if (!realm_allowed(challenge.params["realm"])) throw std::runtime_error("token realm not in token_realms");
    auto realm = parse_location(challenge.params["realm"]);
    auto target = realm.target + (realm.target.find('?') == std::string::npos ? "?" : "&");
    if (auto& service = challenge.params["service"]; !service.empty())
        target += "service=" + net::query_escape(service) + "&";
    const auto& asked = challenge.params["scope"];
    target += "scope=" + net::query_escape(asked.empty() ? scope : asked);
    net::RequestHead head{"GET", target, {}, std::nullopt, false, head_timeout(deadline, config_.answer_timeout)};
    if (!config_.username.empty())
        head.headers.emplace_back("Authorization", "Basic " + oci::base64(config_.username + ":" + config_.password));
    auto tls = config_.tls;
    tls.enabled = realm.url.tls;
    tls.server_name.clear();
    auto exchange = client_.open({realm.url.address, tls}, std::move(head));
    const auto& answer = exchange->read_head();
    if (answer.status != 200) return false;
    auto token = parse_token(read_all(*exchange, answer, max_token_bytes, deadline));
    if (!token) return false;
    std::lock_guard lock(mutex_);
    tokens_[scope] = {std::move(token->value), Clock::now() + token->lifetime};
    return true;
}

Opened RegistryClient::open_at(Address& address, const std::string& method, const std::string& path,
                               const std::string& scope, const net::Headers& headers, Clock::time_point deadline,
                               const Body* body) {
    net::Origin origin = address.origin;
    std::string target = address.prefix + path;
    bool same_host = true, challenged = false;
    for (int hop = 0;; ++hop) {
        net::RequestHead head{method,
                              target,
                              {},
                              body ? body->length : std::nullopt,
                              body != nullptr,
                              head_timeout(deadline, config_.answer_timeout)};
        // Credentials are for the registry, never for whatever it redirects to (spec main): neither
        // the configured headers nor a caller's own Authorization leave its host.
        if (same_host) head.headers = config_.headers;
        for (auto& header : headers)
            if (same_host || !boost::iequals(header.first, "authorization")) head.headers.push_back(header);
        if (same_host)
            if (auto credentials = authorization(scope); !credentials.empty())
                head.headers.emplace_back("Authorization", std::move(credentials));
        Opened opened{client_.open(origin, std::move(head))};
        if (body) {
            body->write(*opened.exchange);
            opened.exchange->end_request();
        }
        opened.head = &opened.exchange->read_head();
        const int status = opened.head->status;
        if (status == 401 && same_host && !challenged && config_.answer_challenges) {
            challenged = true;
            if (answer_challenge(opened.head->header("www-authenticate"), scope, deadline)) continue;
        }
        if (!is_redirect(status) || hop == max_redirects || (method != "GET" && method != "HEAD")) return opened;
        auto location = opened.head->header("location");
        if (location.empty()) return opened;
        if (location.front() == '/') {
            target = location;
        } else {
            auto next = parse_location(location);
            // Credentials are for the registry, never for whatever it redirects to (spec main).
            if (next.url.address != origin.address) same_host = false;
            auto tls = same_host ? origin.tls : net::TlsOptions{};
            tls.enabled = next.url.tls;
            if (!same_host) tls.server_name.clear();
            origin = {next.url.address, tls};
            target = next.target;
        }
    }
}

Opened RegistryClient::open(const std::string& method, const std::string& path, const std::string& scope,
                            const net::Headers& headers, Clock::time_point deadline, const Body* body) {
    auto addresses = candidates();
    if (addresses.empty()) throw net::Error(net::Error::Kind::connect, "upstream unreachable (failed just now)");
    std::exception_ptr last;
    for (auto& address : addresses) {
        try {
            return open_at(*address, method, path, scope, headers, deadline, body);
        } catch (const net::Error& error) {
            last = std::current_exception();
            // An address that does not connect, or connects and then says nothing, is
            // skipped for a while; one that answered garbage is not a reason to try another.
            using Kind = net::Error::Kind;
            if (error.kind() != Kind::connect && error.kind() != Kind::tls && error.kind() != Kind::timeout) throw;
            std::lock_guard lock(mutex_);
            address->down_until = Clock::now() + down_for;
        }
    }
    std::rethrow_exception(last);
}

net::Response RegistryClient::request(const std::string& method, const std::string& path, const std::string& scope,
                                      std::size_t limit, const net::Headers& headers, const Body* body) {
    const auto until = deadline();
    auto opened = open(method, path, scope, headers, until, body);
    net::Response response;
    static_cast<net::ResponseHead&>(response) = *opened.head;
    if (method == "HEAD") return response;
    response.body = read_all(*opened.exchange, *opened.head, limit, until);
    return response;
}

std::vector<net::Response> RegistryClient::request_each(const std::string& method, const std::string& path,
                                                        std::size_t limit, std::chrono::seconds wait,
                                                        const Body* body) {
    std::vector<net::Response> out;
    for (auto& address : candidates()) {
        const auto until = Clock::now() + wait;
        try {
            auto opened = open_at(*address, method, path, "", {}, until, body);
            net::Response response;
            static_cast<net::ResponseHead&>(response) = *opened.head;
            response.body = read_all(*opened.exchange, *opened.head, limit, until);
            out.push_back(std::move(response));
        } catch (const net::Error& error) {
            // As open(): only an address that does not connect or answer is skipped a while.
            using Kind = net::Error::Kind;
            if (error.kind() != Kind::connect && error.kind() != Kind::tls && error.kind() != Kind::timeout) continue;
            std::lock_guard lock(mutex_);
            address->down_until = Clock::now() + down_for;
        }
    }
    return out;
}

std::string RegistryClient::path_of(const std::string& location) const {
    auto path = location;
    if (auto scheme = location.find("://"); scheme != std::string::npos) {
        auto slash = location.find('/', scheme + 3);
        path = slash == std::string::npos ? "/" : location.substr(slash);
    }
    for (auto& url : config_.urls)
        if (!url.path_prefix.empty() && path.starts_with(url.path_prefix + "/"))
            return path.substr(url.path_prefix.size());
    return path;
}

}  // namespace berth::remote
