#pragma once
// The one client of another registry's /v2/ API: the proxy's upstreams, the node agent's replicas,
// and import and export over --url. It answers authentication challenges (Basic, and the token
// flow with its realm, service and scope), follows a read's redirects without carrying
// Authorization to another host, and fails over between the addresses its URLs resolve to. Every
// answer has a deadline. Blocking: for the proxy's party pool and fetch threads
// (http/party_pools.hpp), and the transfer commands' own threads.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "berth/net/client.hpp"

namespace berth::remote {

struct Config {
    std::vector<net::Url> urls;
    net::TlsOptions tls;  // enabled is set per URL
    std::string username, password;
    net::Headers headers;  // sent with every request
    unsigned max_concurrent = 16;
    std::chrono::seconds fetch_timeout{30};  // one whole answer (Upstream::fetch_timeout)
    // How long a registry may take to start answering once asked (a hung one is skipped like a
    // dead one); a blob upload's answer comes after the registry has hashed and stored it.
    std::chrono::milliseconds answer_timeout{5000};
    std::vector<std::string> token_realms;  // Upstream::token_realms
    // Off: a 401 is returned as it came, and no credentials of this config are added (the agent's
    // gate asks with the caller's own Authorization).
    bool answer_challenges = true;
    // A file keeping the addresses the URLs last resolved to, used while a name has no answer
    // (remote/address_book.hpp); empty: none.
    std::string address_book;
};

// A request's body: its length (nullopt: chunked), written to the exchange. Written again when a
// challenge makes the request go again, so it must be repeatable (a string, a file range).
struct Body {
    std::optional<std::uint64_t> length;
    std::function<void(net::Exchange&)> write;
};

// What the remote answered: the head, and the exchange to read the body from.
struct Opened {
    std::unique_ptr<net::Exchange> exchange;
    const net::ResponseHead* head = nullptr;
};

// The Accept header of a manifest request: every manifest type berth stores.
const net::Headers& accept_manifests();
// The token scope a read of repository `name` asks for.
inline std::string scope_of(const std::string& name) { return "repository:" + name + ":pull"; }

class RegistryClient {
public:
    RegistryClient(net::Client& client, Config config);

    using Clock = std::chrono::steady_clock;

    // `path` is the whole API path (oci/paths.hpp: "/v2/library/nginx/manifests/1.25"). Throws net::Error
    // when no address answers, or not by `deadline` (redirects and token
    // requests included); any status is returned as it came.
    Opened open(const std::string& method, const std::string& path, const std::string& scope,
                const net::Headers& headers = {}, Clock::time_point deadline = Clock::time_point::max(),
                const Body* body = nullptr);
    // The same with the whole body, at most `limit` bytes (net::Error too_large
    // beyond), all of it within fetch_timeout however slowly it trickles.
    net::Response request(const std::string& method, const std::string& path, const std::string& scope,
                          std::size_t limit, const net::Headers& headers = {}, const Body* body = nullptr);
    // The same request to every address the URLs resolve to, not one of them (the node agent
    // telling each replica where it is), each answered within `wait`; the answers that came.
    std::vector<net::Response> request_each(const std::string& method, const std::string& path, std::size_t limit,
                                            std::chrono::seconds wait, const Body* body = nullptr);
    // A Location a registry answered (an absolute URL or a path) as an API path, without the URL's
    // path prefix, for open() and request().
    std::string path_of(const std::string& location) const;
    // Times the address book stood in for a name that did not resolve.
    std::uint64_t remembered() const { return remembered_.load(); }
    // When an answer asked for now must be in.
    Clock::time_point deadline() const { return Clock::now() + config_.fetch_timeout; }

    // At most max_concurrent fetches at a time; a Slot waits for its turn
    // until the deadline (then net::Error timeout).
    class Slot {
    public:
        Slot(RegistryClient& remote, Clock::time_point deadline);
        ~Slot();
        Slot(const Slot&) = delete;
        Slot& operator=(const Slot&) = delete;

    private:
        RegistryClient& remote_;
    };

private:
    struct Address {
        net::Origin origin;
        std::string prefix;  // the URL's path prefix
        std::chrono::steady_clock::time_point down_until{};
    };
    // Shared: a request keeps its address while the list is resolved anew.
    std::vector<std::shared_ptr<Address>> candidates();
    Opened open_at(Address& address, const std::string& method, const std::string& path, const std::string& scope,
                   const net::Headers& headers, Clock::time_point deadline, const Body* body);
    // Authorization for scope from what earlier challenges taught; "" for none.
    std::string authorization(const std::string& scope);
    // Learns from a 401's WWW-Authenticate; false when nothing more can be tried.
    bool answer_challenge(const std::string& challenge, const std::string& scope, Clock::time_point deadline);
    // Whether token_realms lets a token (and the credentials) go to this realm.
    bool realm_allowed(const std::string& realm) const;

    net::Client& client_;
    Config config_;
    std::mutex mutex_;
    std::vector<std::shared_ptr<Address>> addresses_;
    std::chrono::steady_clock::time_point resolved_at_{};
    bool basic_ = false;  // the remote asked for Basic
    struct Token {
        std::string value;
        std::chrono::steady_clock::time_point expires;
    };
    std::map<std::string, Token> tokens_;  // by scope
    std::condition_variable slot_freed_;
    unsigned busy_ = 0;
    std::atomic<std::uint64_t> remembered_{0};
};

}  // namespace berth::remote
