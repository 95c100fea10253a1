#pragma once
// Authorization another registry decides: the node agent asks the replicas,
// with the caller's own credentials, whether the caller may read, and answers
// as they do (docs/node-agent.md). The http layer calls it where it would
// call the Authorizer; the proxy implements it.
#include <string>

namespace berth::auth {

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
    // May the caller presenting `authorization` ("" for none) read `repository` ("" for GET
    // /v2/)? `path` is the request's API path with its query, asked of the deciding registry;
    // `origin` is this server as the client called it ("http://HOST"), for challenges' realms.
    // May wait on the deciding registry (net::reach first).
    virtual Verdict check(const std::string& authorization, const std::string& repository, const std::string& path,
                          const std::string& origin) = 0;
    // GET /auth/token?query, sent on with the caller's credentials.
    virtual RelayedToken token(const std::string& authorization, const std::string& query) = 0;
};

}  // namespace berth::auth
