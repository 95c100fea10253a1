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
#include "socket_watchdog.hpp"

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
// Failures are kept per directory entry, so only real accounts take room; past this many, the
// entries not throttled go first, so no stream of names can lift a throttle.
constexpr std::size_t max_failures_kept = 16384;

bool unreachable(int rc) {
    return rc == LDAP_SERVER_DOWN || rc == LDAP_TIMEOUT || rc == LDAP_CONNECT_ERROR || rc == LDAP_UNAVAILABLE ||
           rc == LDAP_BUSY || rc == LDAP_TIMELIMIT_EXCEEDED || rc == LDAP_LOCAL_ERROR;
}

// One connection, closed when it goes. Each step (the connection and its TLS handshake, each
// bind, each search) may take the timeout, no longer: the watchdog shuts the socket down when a
// step overruns it, so a directory that stops answering fails the step with a 503.
class Connection {
public:
    explicit Connection(SocketWatchdog& watchdog) : watchdog_(watchdog) {}
    ~Connection() {
        if (watched_) watchdog_.forget(watched_);
        if (ld_) ldap_unbind_ext_s(ld_, nullptr, nullptr);
    }

    int open(const LdapOptions& o) {
        timeout_ = o.timeout;
        int rc = ldap_initialize(&ld_, o.url.c_str());
        if (rc != LDAP_SUCCESS) return rc;
        callback_ = {watch_socket, socket_gone, this};
        if ((rc = ldap_set_option(ld_, LDAP_OPT_CONNECT_CB, &callback_)) != LDAP_SUCCESS) return rc;
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
        step();
        berval credentials{static_cast<ber_len_t>(password.size()), const_cast<char*>(password.data())};
        return ldap_sasl_bind_s(ld_, dn.c_str(), LDAP_SASL_SIMPLE, &credentials, nullptr, nullptr, nullptr);
    }

    // The DNs of the entries filter finds under base (at most `limit`), or the
    // values of attribute when one is named.
    int search(const LdapOptions& o, const std::string& base, const std::string& filter, const char* attribute,
               int limit, std::vector<std::string>& out) {
        step();
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
    // libldap's connection callback: the socket exists, the TLS handshake is next.
    static int watch_socket(LDAP*, Sockbuf* sb, LDAPURLDesc*, sockaddr*, ldap_conncb* callback) {
        auto* self = static_cast<Connection*>(callback->lc_arg);
        ber_socket_t fd = -1;
        if (!self->watched_ && ber_sockbuf_ctrl(sb, LBER_SB_OPT_GET_FD, &fd) == 1 && fd >= 0)
            self->watched_ = self->watchdog_.watch(fd, SocketWatchdog::Clock::now() + self->timeout_);
        return 0;
    }
    static void socket_gone(LDAP*, Sockbuf*, ldap_conncb*) {}
    // A new step gets the whole timeout (the connection is made in the first one's time).
    void step() {
        if (watched_) watchdog_.renew(watched_, SocketWatchdog::Clock::now() + timeout_);
    }

    SocketWatchdog& watchdog_;
    LDAP* ld_ = nullptr;
    ldap_conncb callback_{};
    std::chrono::seconds timeout_{5};
    std::uint64_t watched_ = 0;
};

std::string fill(std::string pattern, std::string_view placeholder, const std::string& value) {
    for (auto at = pattern.find(placeholder); at != std::string::npos;
         at = pattern.find(placeholder, at + value.size()))
        pattern.replace(at, placeholder.size(), value);
    return pattern;
}

}  // namespace

std::string normalized_username(std::string_view name) {
    std::string out;
    bool space = false;
    for (unsigned char c : name) {
        if (c == ' ' || c == '\t') {
            space = !out.empty();
            continue;
        }
        if (space) out += ' ';
        space = false;
        out += static_cast<char>(std::tolower(c));
    }
    return out;
}

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
    SocketWatchdog watchdog;
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
        bool throttled(Clock::time_point now) const { return count >= max_failures && now - since <= failure_window; }
    };
    std::unordered_map<std::string, Failures> failures;    // by the entry's DN, lower-cased
    std::unordered_map<std::string, std::string> entries;  // normalized name -> its DN, as last found
    Clock::time_point down_until{};

    std::string credential_key(const std::string& username, const std::string& password) const {
        return oci::Digest::of(oci::DigestAlgorithm::sha256, salt + username + '\0' + password).hex();
    }

    // Under mutex. Entries past their time go first; past the bound, all of them.
    template <typename Map, typename Expired>
    static void bound(Map& map, Expired expired) {
        if (map.size() < max_remembered) return;
        std::erase_if(map, expired);
        if (map.size() >= max_remembered) map.clear();
    }

    // Under mutex.
    bool throttled(const std::string& dn) const {
        auto it = failures.find(dn);
        return it != failures.end() && it->second.throttled(Clock::now());
    }

    // Under mutex. A full table drops what has expired, then what is not throttled (oldest first):
    // a throttle ends only with its window.
    void make_room_for_failure(Clock::time_point now) {
        if (failures.size() < max_failures_kept) return;
        std::erase_if(failures, [&](auto& entry) { return now - entry.second.since > failure_window; });
        while (failures.size() >= max_failures_kept) {
            auto oldest = failures.end();
            for (auto it = failures.begin(); it != failures.end(); ++it)
                if (oldest == failures.end() || it->second.throttled(now) < oldest->second.throttled(now) ||
                    (it->second.throttled(now) == oldest->second.throttled(now) &&
                     it->second.since < oldest->second.since))
                    oldest = it;
            failures.erase(oldest);
        }
    }

    void remember_failure(const std::string& dn) {
        std::lock_guard lock(mutex);
        const auto now = Clock::now();
        if (!failures.count(dn)) make_room_for_failure(now);
        auto& f = failures[dn];
        if (now - f.since > failure_window) f = {0, now};
        ++f.count;
    }

    void remember_entry(const std::string& name, const std::string& dn) {
        std::lock_guard lock(mutex);
        if (entries.size() >= max_remembered) entries.clear();
        entries[name] = dn;
    }

    DirectoryLogin ask(const std::string& name, const std::string& password) {
        Connection connection(watchdog);
        std::vector<std::string> users, groups;
        int rc = connection.open(options);
        if (rc == LDAP_SUCCESS) rc = connection.bind(options.bind_dn, options.bind_password);
        if (rc == LDAP_SUCCESS)
            rc = connection.search(options, options.user_search_base,
                                   fill(options.user_filter, "{username}", escape_filter_value(name)), nullptr, 2,
                                   users);
        if (rc == LDAP_SIZELIMIT_EXCEEDED || (rc == LDAP_SUCCESS && users.size() != 1))
            return {Result::refused, {}, {}, "invalid username or password"};
        if (rc != LDAP_SUCCESS) return trouble(rc, "searching for the user");
        // The entry is the user, however the name was spelled: its failures are counted together.
        const auto dn = normalized_username(users.front());
        remember_entry(name, dn);
        {
            std::lock_guard lock(mutex);
            if (throttled(dn)) return {Result::throttled, {}, {}, "too many failed logins; try again later"};
        }
        rc = connection.bind(users.front(), password);
        if (rc == LDAP_INVALID_CREDENTIALS) {
            remember_failure(dn);
            return {Result::refused, {}, {}, "invalid username or password"};
        }
        if (rc != LDAP_SUCCESS) return trouble(rc, "binding as the user");
        if (!options.group_search_base.empty()) {
            auto filter = fill(fill(options.group_filter, "{dn}", escape_filter_value(users.front())), "{username}",
                               escape_filter_value(name));
            rc = connection.bind(options.bind_dn, options.bind_password);
            if (rc == LDAP_SUCCESS)
                rc = connection.search(options, options.group_search_base, filter, "cn", max_groups, groups);
            if (rc != LDAP_SUCCESS && rc != LDAP_SIZELIMIT_EXCEEDED) return trouble(rc, "searching for groups");
        }
        for (auto& group : groups) group = options.groups_prefix + group;
        return {Result::ok, options.username_prefix + name, std::move(groups), {}};
    }

    // The directory could not be asked: it is down, slow, or refuses the searching account.
    DirectoryLogin trouble(int rc, const char* step) {
        observe::log("warn", "LDAP directory unavailable",
                     {{"url", options.url}, {"step", step}, {"error", std::string(ldap_err2string(rc))}});
        if (unreachable(rc)) {
            std::lock_guard lock(mutex);
            down_until = Clock::now() + outage_hold;
        }
        return {Result::unavailable, {}, {}, "the directory (LDAP) is unavailable"};
    }
};

LdapDirectory::LdapDirectory(LdapOptions options) : impl_(std::make_unique<Impl>()) {
    impl_->options = std::move(options);
}

LdapDirectory::~LdapDirectory() = default;

DirectoryLogin LdapDirectory::login(const std::string& username, const std::string& password) {
    const auto name = normalized_username(username);
    // An empty password would be an unauthenticated bind (RFC 4513 5.1.2), which succeeds.
    if (password.empty() || name.empty() || name.size() > max_username_bytes || password.size() > max_password_bytes)
        return {Result::refused, {}, {}, "invalid username or password"};
    auto& i = *impl_;
    const auto key = i.credential_key(name, password);
    {
        std::lock_guard lock(i.mutex);
        const auto now = Clock::now();
        if (auto it = i.logins.find(key); it != i.logins.end()) {
            if (it->second.until > now) return {Result::ok, i.options.username_prefix + name, it->second.groups, {}};
            i.logins.erase(it);
        }
        if (auto entry = i.entries.find(name); entry != i.entries.end() && i.throttled(entry->second))
            return {Result::throttled, {}, {}, "too many failed logins; try again later"};
        if (now < i.down_until) return {Result::unavailable, {}, {}, "the directory (LDAP) is unavailable"};
    }
    net::reach(net::ldap_party);
    auto answer = i.ask(name, password);
    if (answer.result == Result::ok && i.options.cache_seconds.count() > 0) {
        std::lock_guard lock(i.mutex);
        const auto now = Clock::now();
        Impl::bound(i.logins, [&](auto& entry) { return entry.second.until <= now; });
        i.logins[key] = {answer.groups, now + i.options.cache_seconds};
    }
    return answer;
}

}  // namespace berth::auth
