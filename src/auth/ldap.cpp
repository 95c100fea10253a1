#include "ldap.hpp"

#include <ldap.h>
#include <cctype>
#include <cstring>
#include <sys/time.h>

#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "berth/net/reach.hpp"
#include "berth/oci/digest.hpp"
#include "berth/oci/encoding.hpp"
#include "berth/observe/log.hpp"

namespace berth::auth {

namespace {

using Clock = std::chrono::steady_clock;
using Result = DirectoryLogin::Result;

// What the directory answers is untrusted too: a DN or a group name longer than
// these, or more groups, is not taken.
constexpr std::size_t max_dn_bytes = 4096, max_group_bytes = 256;
constexpr int max_groups = 500;
constexpr std::size_t max_username_bytes = 256, max_password_bytes = 1024;
// Failed logins allowed per user in a window; past them the user waits for the window to end
// without the directory being asked (it would lock the account, or be a password oracle).
constexpr int max_failures = 5;
constexpr auto failure_window = std::chrono::seconds(60);
// After the directory could not be reached, logins are refused at once for this long.
constexpr auto outage_hold = std::chrono::seconds(2);
constexpr std::size_t max_remembered = 4096;

bool unreachable(int rc) {
    return rc == LDAP_SERVER_DOWN || rc == LDAP_TIMEOUT || rc == LDAP_CONNECT_ERROR || rc == LDAP_UNAVAILABLE ||
           rc == LDAP_BUSY || rc == LDAP_TIMELIMIT_EXCEEDED || rc == LDAP_LOCAL_ERROR;
}

// One connection, closed when it goes.
class Connection {
public:
    ~Connection() {
        if (ld_) ldap_unbind_ext_s(ld_, nullptr, nullptr);
    }

    int open(const LdapOptions& o) {
        int rc = ldap_initialize(&ld_, o.url.c_str());
        if (rc != LDAP_SUCCESS) return rc;
        int version = LDAP_VERSION3, demand = LDAP_OPT_X_TLS_DEMAND, tls12 = LDAP_OPT_X_TLS_PROTOCOL_TLS1_2, zero = 0;
        timeval limit{static_cast<time_t>(o.timeout.count()), 0};
        ldap_set_option(ld_, LDAP_OPT_PROTOCOL_VERSION, &version);
        ldap_set_option(ld_, LDAP_OPT_REFERRALS, LDAP_OPT_OFF);  // a referral must not send a password elsewhere
        ldap_set_option(ld_, LDAP_OPT_NETWORK_TIMEOUT, &limit);
        ldap_set_option(ld_, LDAP_OPT_TIMEOUT, &limit);
        ldap_set_option(ld_, LDAP_OPT_X_TLS_REQUIRE_CERT, &demand);
        ldap_set_option(ld_, LDAP_OPT_X_TLS_PROTOCOL_MIN, &tls12);
        if (!o.ca_file.empty()) ldap_set_option(ld_, LDAP_OPT_X_TLS_CACERTFILE, o.ca_file.c_str());
        if ((rc = ldap_set_option(ld_, LDAP_OPT_X_TLS_NEWCTX, &zero)) != LDAP_SUCCESS) return rc;
        // Passwords never cross the network in clear: ldap:// is upgraded or refused.
        if (o.url.starts_with("ldap://")) return ldap_start_tls_s(ld_, nullptr, nullptr);
        return LDAP_SUCCESS;
    }

    int bind(const std::string& dn, const std::string& password) {
        berval credentials{static_cast<ber_len_t>(password.size()), const_cast<char*>(password.data())};
        return ldap_sasl_bind_s(ld_, dn.c_str(), LDAP_SASL_SIMPLE, &credentials, nullptr, nullptr, nullptr);
    }

    // The DNs of the entries filter finds under base (at most `limit`), or the
    // values of attribute when one is named.
    int search(const LdapOptions& o, const std::string& base, const std::string& filter, const char* attribute,
               int limit, std::vector<std::string>& out) {
        char* attributes[] = {const_cast<char*>(attribute ? attribute : LDAP_NO_ATTRS), nullptr};
        timeval time_limit{static_cast<time_t>(o.timeout.count()), 0};
        LDAPMessage* answer = nullptr;
        int rc = ldap_search_ext_s(ld_, base.c_str(), LDAP_SCOPE_SUBTREE, filter.c_str(), attributes, 0, nullptr,
                                   nullptr, &time_limit, limit, &answer);
        std::unique_ptr<LDAPMessage, int (*)(LDAPMessage*)> owned(answer, ldap_msgfree);
        if (rc != LDAP_SUCCESS && rc != LDAP_SIZELIMIT_EXCEEDED) return rc;
        for (auto* entry = ldap_first_entry(ld_, answer); entry; entry = ldap_next_entry(ld_, entry)) {
            if (!attribute) {
                char* dn = ldap_get_dn(ld_, entry);
                if (dn && std::strlen(dn) <= max_dn_bytes) out.emplace_back(dn);
                ldap_memfree(dn);
                continue;
            }
            berval** values = ldap_get_values_len(ld_, entry, attribute);
            for (auto** v = values; v && *v; ++v)
                if ((*v)->bv_len > 0 && (*v)->bv_len <= max_group_bytes) out.emplace_back((*v)->bv_val, (*v)->bv_len);
            ldap_value_free_len(values);
        }
        return rc;
    }

private:
    LDAP* ld_ = nullptr;
};

std::string fill(std::string pattern, std::string_view placeholder, const std::string& value) {
    for (auto at = pattern.find(placeholder); at != std::string::npos;
         at = pattern.find(placeholder, at + value.size()))
        pattern.replace(at, placeholder.size(), value);
    return pattern;
}

}  // namespace

std::string escape_filter_value(std::string_view value) {
    static const char hex[] = "0123456789abcdef";
    std::string out;
    for (unsigned char c : value) {
        if (std::isalnum(c) || c == '.' || c == '-' || c == '_' || c == '@' || c == ' ' || c == '=' || c == ',') {
            out += static_cast<char>(c);
        } else {
            out += '\\';
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    return out;
}

struct LdapDirectory::Impl {
    LdapOptions options;
    std::string salt = oci::random_bytes(16);

    std::mutex mutex;
    struct Remembered {
        std::vector<std::string> groups;
        Clock::time_point until;
    };
    std::unordered_map<std::string, Remembered> logins;  // salted hash of the credentials -> groups
    struct Failures {
        int count = 0;
        Clock::time_point since;
    };
    std::unordered_map<std::string, Failures> failures;  // by user name, lower-cased
    Clock::time_point down_until{};

    std::string credential_key(const std::string& username, const std::string& password) const {
        return oci::Digest::of(oci::DigestAlgorithm::sha256, salt + username + '\0' + password).hex();
    }

    static std::string lowered(std::string name) {
        for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        return name;
    }

    // Under mutex. Entries past their time go first; past the bound, all of them.
    template <typename Map, typename Expired>
    static void bound(Map& map, Expired expired) {
        if (map.size() < max_remembered) return;
        std::erase_if(map, expired);
        if (map.size() >= max_remembered) map.clear();
    }

    void remember_failure(const std::string& username) {
        std::lock_guard lock(mutex);
        const auto now = Clock::now();
        bound(failures, [&](auto& entry) { return now - entry.second.since > failure_window; });
        auto& f = failures[lowered(username)];
        if (now - f.since > failure_window) f = {0, now};
        ++f.count;
    }

    DirectoryLogin ask(const std::string& username, const std::string& password) {
        Connection connection;
        std::vector<std::string> users, groups;
        int rc = connection.open(options);
        if (rc == LDAP_SUCCESS) rc = connection.bind(options.bind_dn, options.bind_password);
        if (rc == LDAP_SUCCESS)
            rc = connection.search(options, options.user_search_base,
                                   fill(options.user_filter, "{username}", escape_filter_value(username)), nullptr, 2,
                                   users);
        if (rc == LDAP_SIZELIMIT_EXCEEDED || (rc == LDAP_SUCCESS && users.size() != 1))
            return {Result::refused, {}, "invalid username or password"};
        if (rc != LDAP_SUCCESS) return trouble(rc, "searching for the user");
        rc = connection.bind(users.front(), password);
        if (rc == LDAP_INVALID_CREDENTIALS) return {Result::refused, {}, "invalid username or password"};
        if (rc != LDAP_SUCCESS) return trouble(rc, "binding as the user");
        if (!options.group_search_base.empty()) {
            auto filter = fill(fill(options.group_filter, "{dn}", escape_filter_value(users.front())), "{username}",
                               escape_filter_value(username));
            rc = connection.bind(options.bind_dn, options.bind_password);
            if (rc == LDAP_SUCCESS)
                rc = connection.search(options, options.group_search_base, filter, "cn", max_groups, groups);
            if (rc != LDAP_SUCCESS && rc != LDAP_SIZELIMIT_EXCEEDED) return trouble(rc, "searching for groups");
        }
        return {Result::ok, std::move(groups), {}};
    }

    // The directory could not be asked: it is down, slow, or refuses the searching account.
    DirectoryLogin trouble(int rc, const char* step) {
        observe::log("warn", "LDAP directory unavailable",
                     {{"url", options.url}, {"step", step}, {"error", std::string(ldap_err2string(rc))}});
        if (unreachable(rc)) {
            std::lock_guard lock(mutex);
            down_until = Clock::now() + outage_hold;
        }
        return {Result::unavailable, {}, "the directory (LDAP) is unavailable"};
    }
};

LdapDirectory::LdapDirectory(LdapOptions options) : impl_(std::make_unique<Impl>()) {
    impl_->options = std::move(options);
}

LdapDirectory::~LdapDirectory() = default;

DirectoryLogin LdapDirectory::login(const std::string& username, const std::string& password) {
    // An empty password would be an unauthenticated bind (RFC 4513 5.1.2), which succeeds.
    if (password.empty() || username.empty() || username.size() > max_username_bytes ||
        password.size() > max_password_bytes)
        return {Result::refused, {}, "invalid username or password"};
    auto& i = *impl_;
    const auto key = i.credential_key(username, password);
    {
        std::lock_guard lock(i.mutex);
        const auto now = Clock::now();
        if (auto it = i.logins.find(key); it != i.logins.end()) {
            if (it->second.until > now) return {Result::ok, it->second.groups, {}};
            i.logins.erase(it);
        }
        if (auto it = i.failures.find(Impl::lowered(username));
            it != i.failures.end() && it->second.count >= max_failures && now - it->second.since <= failure_window)
            return {Result::throttled, {}, "too many failed logins; try again later"};
        if (now < i.down_until) return {Result::unavailable, {}, "the directory (LDAP) is unavailable"};
    }
    net::reach(net::ldap_party);
    auto answer = i.ask(username, password);
    if (answer.result == Result::refused) i.remember_failure(username);
    if (answer.result == Result::ok && i.options.cache_seconds.count() > 0) {
        std::lock_guard lock(i.mutex);
        const auto now = Clock::now();
        Impl::bound(i.logins, [&](auto& entry) { return entry.second.until <= now; });
        i.logins[key] = {answer.groups, now + i.options.cache_seconds};
    }
    return answer;
}

}  // namespace berth::auth
