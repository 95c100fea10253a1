#pragma once
// One registry this one reads from over HTTP: an upstream, or another replica
// a fetch was delegated to. It answers authentication challenges (Basic, and
// the token flow with its realm, service and scope), follows redirects
// without carrying Authorization to another host, and fails over between the
// addresses its URLs resolve to. Blocking: for worker and fetch threads.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "berth/net/client.hpp"

namespace berth::proxy {

struct RemoteConfig {
    std::vector<net::Url> urls;
    net::TlsOptions tls;  // enabled is set per URL
    std::string username, password;
    net::Headers headers;  // sent with every request
    unsigned max_concurrent = 16;
};

// What the remote answered: the head, and the exchange to read the body from.
struct Opened {
    std::unique_ptr<net::Exchange> exchange;
    const net::ResponseHead* head = nullptr;
};

class Remote {
public:
    Remote(net::Client& client, RemoteConfig config);

    // `path` follows /v2/ ("library/nginx/manifests/1.25"). Throws net::Error
    // when no address answers; any status is returned as it came.
    Opened open(const std::string& method, const std::string& path, const std::string& scope,
                const net::Headers& headers = {});
    // The same with the whole body, at most `limit` bytes (net::Error too_large beyond).
    net::Response request(const std::string& method, const std::string& path, const std::string& scope,
                          std::size_t limit, const net::Headers& headers = {});

    // At most max_concurrent fetches at a time; a Slot waits for its turn.
    class Slot {
    public:
        explicit Slot(Remote& remote);
        ~Slot();
        Slot(const Slot&) = delete;
        Slot& operator=(const Slot&) = delete;

    private:
        Remote& remote_;
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
                   const net::Headers& headers);
    // Authorization for scope from what earlier challenges taught; "" for none.
    std::string authorization(const std::string& scope);
    // Learns from a 401's WWW-Authenticate; false when nothing more can be tried.
    bool answer_challenge(const std::string& challenge, const std::string& scope);

    net::Client& client_;
    RemoteConfig config_;
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
};

}  // namespace berth::proxy
