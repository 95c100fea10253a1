#include "berth/ui/sign_in.hpp"

#include <nlohmann/json.hpp>

#include "berth/auth/authorizer.hpp"
#include "berth/oci/encoding.hpp"
#include "berth/oci/error.hpp"
#include "berth/observe/log.hpp"

namespace berth::ui {

using oci::Error;
using oci::ErrorCode;

// Origin is compared with the Host the browser used (or the one a reverse proxy says it used,
// X-Forwarded-Host). The UI's pages send no referrer, so a browser may say "Origin: null" of its
// own form: that passes only with Sec-Fetch-Site saying same-origin (a sandboxed frame's form says
// cross-site).
void require_same_origin(const FormSource& source) {
    if (!source.fetch_site.empty() && source.fetch_site != "same-origin" && source.fetch_site != "none")
        throw Error(ErrorCode::denied, "a sign-in from another site is refused");
    if (source.origin.empty()) return;  // not a browser: nothing to forge a visitor's sign-in with
    if (source.origin == "null") {
        if (source.fetch_site.empty()) throw Error(ErrorCode::denied, "a sign-in from an unknown origin is refused");
        return;
    }
    const auto scheme_end = source.origin.find("://");
    const auto host = scheme_end == std::string::npos ? std::string() : source.origin.substr(scheme_end + 3);
    if (host.empty() || (host != source.host && host != source.forwarded_host))
        throw Error(ErrorCode::denied, "a sign-in from another origin is refused");
    // Over TLS, a page served without it is another origin (behind a proxy that ends TLS, the
    // request is plain and the page may be either).
    if (source.secure && !source.origin.starts_with("https://"))
        throw Error(ErrorCode::denied, "a sign-in from a page without TLS is refused");
}

SignInAnswer sign_in(const auth::Authorizer* authorizer, const Sessions& sessions, const FormSource& source,
                     const std::string& username, const std::string& password) {
    if (!authorizer || !authorizer->enabled()) return {"./", {}};
    if (username.empty() || username.find(':') != std::string::npos) return {"login?failed", {}};
    auto decision =
        authorizer->check("Basic " + oci::base64(username + ":" + password), {}, source.host, source.secure);
    const bool signed_in = decision.allowed && !decision.principal.anonymous();
    observe::log("info", "audit",
                 {{"action", signed_in ? "ui sign-in" : "ui sign-in refused"},
                  {"principal", username},
                  {"peer", source.address}});
    if (!signed_in) return {"login?failed", {}};
    return {"./", sessions.sign_in(decision.principal, source.secure, decision.expires,
                                   authorizer->credential_generation(decision.principal))};
}

}  // namespace berth::ui
