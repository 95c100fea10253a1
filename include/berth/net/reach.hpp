#pragma once
// Reads are planned on the I/O threads, which must never wait on another
// party (an upstream, a peer): one that hangs would stall every connection on
// that thread, probes included. While a LocalOnly lives on a thread, code
// about to wait on a party calls reach(party), which throws NeedsRemote
// instead; the caller plans the request again on that party's own bounded
// pool (http/party_pools.hpp), where waiting is allowed.
#include <string>

namespace berth::net {

// Party names: "peers", "upstream:" + an upstream's host, "ldap".
inline const std::string peers_party = "peers";
inline std::string upstream_party(const std::string& host) { return "upstream:" + host; }
inline const std::string ldap_party = "ldap";

struct NeedsRemote {
    std::string party;
};

namespace detail {
inline thread_local bool local_only = false;
}

class LocalOnly {
public:
    LocalOnly() : outer_(detail::local_only) { detail::local_only = true; }
    ~LocalOnly() { detail::local_only = outer_; }
    LocalOnly(const LocalOnly&) = delete;
    LocalOnly& operator=(const LocalOnly&) = delete;

private:
    bool outer_;
};

// Throws NeedsRemote{party} while a LocalOnly lives on this thread.
inline void reach(const std::string& party) {
    if (detail::local_only) throw NeedsRemote{party};
}

}  // namespace berth::net
