#pragma once
// Authorization another registry decides: the node agent asks the replicas,
// with the caller's own credentials, whether the caller may read, and answers
// as they do (docs/node-agent.md). The http layer calls it where it would
// call the Authorizer; the proxy implements it.
#include <string>
#include <string_view>

namespace berth::auth {

// The question the deciding registry answers: GET access_path?repository=NAME with the caller's
// credentials is 204 with `access_header: pull` when its rules let the caller pull NAME (whether
// NAME exists or not), else 401 or 403. Nothing else is an allow: not a 404, not another 2xx.
inline constexpr std::string_view access_path = "/_berth/v1/access";
inline constexpr std::string_view access_header = "Berth-Access";
// What the node agent asks about a repository (a valid name): access_path?repository=NAME, escaped;
// "/v2/" for "" (may the caller sign in at all).
std::string access_target(const std::string& repository);

struct Verdict {
    int status = 200;       // 200: allowed; 401, 403: refused; 503: the deciding registry is out of reach
    std::string challenge;  // a 401's WWW-Authenticate, its realm pointing at this server where it was theirs
    std::string message;
    bool allowed() const { return status == 200; }
};

// A token endpoint's answer, relayed.
struct RelayedToken {
    int status = 200;
    std::string body;
};

class DelegatedAccess {
public:
    virtual ~DelegatedAccess() = default;
    // May the caller presenting `authorization` ("" for none) pull `repository` (a valid name), or,
    // with "", sign in at all (GET /v2/)? `origin` is this server as the client called it
    // ("http://HOST"), for challenges' realms. May wait on the deciding registry (net::reach first).
    virtual Verdict check(const std::string& authorization, const std::string& repository,
                          const std::string& origin) = 0;
    // GET /auth/token?query, sent on with the caller's credentials.
    virtual RelayedToken token(const std::string& authorization, const std::string& query) = 0;
};

}  // namespace berth::auth
