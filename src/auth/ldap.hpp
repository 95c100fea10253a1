#pragma once
// Basic logins checked against a site directory (auth.ldap), through OpenLDAP's
// client library: find the user with the searching account, bind as the user
// with the password given, then find the user's groups.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "berth/auth/options.hpp"

namespace berth::auth {

struct DirectoryLogin {
    enum class Result { ok, refused, throttled, unavailable } result = Result::refused;
    std::string principal;            // username_prefix + the name as the directory matches it
    std::vector<std::string> groups;  // groups_prefix + the cn of each group found
    std::string message;              // why, for the client and the log
};

class LdapDirectory {
public:
    explicit LdapDirectory(LdapOptions options);
    ~LdapDirectory();

    // Answers from memory when it can (a login that succeeded lately, a user
    // throttled, a directory known to be down); otherwise calls
    // net::reach(net::ldap_party) and asks the directory, waiting at most
    // timeout for the connection, the TLS handshake and each operation.
    // Failed logins are counted per directory entry (its DN), so every
    // spelling the directory takes for one user ("Alice", " alice") shares
    // its count.
    DirectoryLogin login(const std::string& username, const std::string& password);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// A typed user name as directories compare them (caseIgnoreMatch, RFC 4518's insignificant
// spaces): without the spaces around it, runs of spaces as one, lower case.
std::string normalized_username(std::string_view name);

// RFC 4515 section 3: a value placed in a search filter, with * ( ) \ NUL and
// bytes outside ASCII written as \XX.
std::string escape_filter_value(std::string_view value);

}  // namespace berth::auth
