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

// Not an outside party: work whose cost a client controls (judging the signatures a pusher
// attached) never runs on an I/O thread either; planned there, it is planned again on a worker.
inline const std::string workers_party = "workers";

struct NeedsRemote {
    std::string party;
};

namespace detail {
inline thread_local bool local_only = false;
inline thread_local bool io_thread = false;
}  // namespace detail

class LocalOnly {
public:
    LocalOnly() : outer_(detail::local_only) { detail::local_only = true; }
    ~LocalOnly() { detail::local_only = outer_; }
    LocalOnly(const LocalOnly&) = delete;
    LocalOnly& operator=(const LocalOnly&) = delete;

private:
    bool outer_;
};

// Marks planning on an I/O thread while it lives.
class OnIoThread {
public:
    OnIoThread() : outer_(detail::io_thread) { detail::io_thread = true; }
    ~OnIoThread() { detail::io_thread = outer_; }
    OnIoThread(const OnIoThread&) = delete;
    OnIoThread& operator=(const OnIoThread&) = delete;

private:
    bool outer_;
};

inline bool on_io_thread() { return detail::io_thread; }

// Throws NeedsRemote{workers_party} while an OnIoThread lives on this thread.
inline void leave_io_thread() {
    if (detail::io_thread) throw NeedsRemote{workers_party};
}

// Throws NeedsRemote{party} while a LocalOnly lives on this thread.
inline void reach(const std::string& party) {
    if (detail::local_only) throw NeedsRemote{party};
}

}  // namespace berth::net
