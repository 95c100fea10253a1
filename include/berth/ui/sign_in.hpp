#pragma once
// Signing in to the web UI (docs/ui.md): the same checks as a Basic login to /v2/ (htpasswd, LDAP, an
// issuer's token as the password), from this UI's own pages only, giving a session cookie.
#include <string>

#include "berth/ui/sessions.hpp"

namespace berth::auth {
class Authorizer;
}

namespace berth::ui {

// Where a browser says a sign-in form came from, and where it sent it.
struct FormSource {
    std::string origin;          // Origin
    std::string fetch_site;      // Sec-Fetch-Site
    std::string host;            // Host
    std::string forwarded_host;  // X-Forwarded-Host: the host a reverse proxy says the browser used
    bool secure = false;         // over TLS
    std::string address;         // the client's, for the audit trail
};

// Throws DENIED for a form from another site or origin: another site's form must not sign a
// visitor in as someone else.
void require_same_origin(const FormSource& source);

// Where the browser goes next (relative), and the Set-Cookie that signs it in, if it did.
struct SignInAnswer {
    std::string location;
    std::string cookie;
};
// Checks the form's username and password; authorizer null or off: nobody needs to sign in.
SignInAnswer sign_in(const auth::Authorizer* authorizer, const Sessions& sessions, const FormSource& source,
                     const std::string& username, const std::string& password);

}  // namespace berth::ui
