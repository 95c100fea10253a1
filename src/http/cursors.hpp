#pragma once
// Paging cursors that name nothing the caller may not see. A page filtered to what the caller
// may pull ends where the reading stopped; when that is a name the caller may not see, the next
// page's `last` is that name sealed (AES-256-GCM, "~" + base64url): opaque to the caller, opened
// by any replica (the key is derived from the cluster's secret for this purpose alone). Names
// never begin with "~", so a `last` a client wrote itself is taken as it is.
#include <string>

namespace berth::http {

class Cursors {
public:
    // key: 32 bytes, or "" for a key of this process only.
    explicit Cursors(std::string key);
    // The `last` of the next page: the name itself when the caller may see it, else sealed.
    std::string next(const std::string& name, bool visible) const;
    // The name a `last` parameter stands for; throws 400 for a sealed one this cluster did not seal.
    std::string open(const std::string& last) const;

private:
    std::string key_;
};

}  // namespace berth::http
