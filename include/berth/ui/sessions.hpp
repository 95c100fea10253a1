#pragma once
// The web UI's sign-in: a session is a cookie holding who signed in and until when, sealed with
// HMAC-SHA256. Nothing is kept on the server, so any replica accepts a session another replica
// gave (their key is ui.session_secret_file's, or derived from the cluster's secret under its own
// label) and a restart signs nobody out; alone, a replica draws a key at start. Signing out clears
// the cookie; a copy of it stays valid until it expires, which is why sessions are short
// (ui.session_lifetime) and never outlive the credential they came from (a token's exp).
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "berth/auth/authorizer.hpp"
#include "berth/ui/options.hpp"

namespace berth::replication {
class PeerService;
}

namespace berth::ui {

inline constexpr std::string_view session_cookie = "berth_session";

class Sessions {
public:
    // The sessions' key: ui.session_secret_file's, else one derived from the cluster's secret under
    // its own label (never the secret itself), else "" (a key drawn at start).
    static std::string key_for(const Options& options, const replication::PeerService* peers);
    // key: the sealing key (32 bytes), or "" for a key of this process only.
    Sessions(std::string key, std::chrono::seconds lifetime);

    // The Set-Cookie value that signs principal in until its lifetime or expires (Unix seconds),
    // whichever comes first; secure: the request came over TLS. generation: what the session
    // remembers of the credential (auth::Authorizer::credential_generation).
    std::string sign_in(const auth::Principal& principal, bool secure, std::optional<std::int64_t> expires,
                        const std::string& generation) const;
    // The Set-Cookie value that signs out.
    static std::string sign_out(bool secure);
    // Who a Cookie header's session names, if it holds one that is sealed here and current, with
    // the credential's generation it was signed in with.
    struct Session {
        auth::Principal principal;
        std::string generation;
    };
    std::optional<Session> session(std::string_view cookie_header) const;

private:
    std::string seal(std::string_view payload) const;
    std::string key_;
    std::chrono::seconds lifetime_;
};

}  // namespace berth::ui
