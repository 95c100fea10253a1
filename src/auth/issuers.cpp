#include "issuers.hpp"

#include <algorithm>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "berth/observe/log.hpp"
#include "berth/oci/json.hpp"
#include "jwt.hpp"

namespace berth::auth {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr std::size_t max_key_set_bytes = 256 << 10;
constexpr std::size_t max_keys = 64;
constexpr std::size_t max_groups = 256;
constexpr std::size_t max_cached_tokens = 10000;
// An unknown kid makes the key set be read again at most this often: a stream of
// forged kids must not turn into a stream of reads.
constexpr auto unknown_kid_interval = std::chrono::seconds(10);

using Keys = std::vector<std::shared_ptr<JwtKey>>;

// The usable keys of a JWK Set; throws std::runtime_error when none is.
Keys parse_key_set(std::string_view text, const std::string& where) {
    if (text.size() > max_key_set_bytes) throw std::runtime_error(where + ": key set larger than 256 KiB");
    auto doc = oci::parse_json(text);
    if (!doc.is_object() || !doc.contains("keys") || !doc["keys"].is_array())
        throw std::runtime_error(where + ": not a JWK Set ({\"keys\": [...]})");
    Keys keys;
    std::string skipped;
    for (auto& jwk : doc["keys"]) {
        if (keys.size() == max_keys) break;
        try {
            keys.push_back(JwtKey::from_jwk(jwk));
        } catch (const std::exception& error) {
            skipped = error.what();  // an encryption key, say: not ours to use
        }
    }
    if (keys.empty())
        throw std::runtime_error(where + ": no usable signing key" + (skipped.empty() ? "" : ": " + skipped));
    return keys;
}

Keys read_key_set(const std::string& file) {
    std::ifstream in(file);
    if (!in) throw std::runtime_error("cannot read " + file);
    std::ostringstream text;
    text << in.rdbuf();
    return parse_key_set(text.str(), file);
}

std::string string_claim(const json& claims, const std::string& name) {
    auto it = claims.find(name);
    return it != claims.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

std::optional<Principal> service_account_of(const json& claims) {
    auto k8s = claims.find("kubernetes.io");
    if (k8s == claims.end() || !k8s->is_object()) return std::nullopt;
    auto ns = k8s->find("namespace");
    auto account = k8s->find("serviceaccount");
    if (ns == k8s->end() || !ns->is_string() || account == k8s->end() || !account->is_object()) return std::nullopt;
    auto name = account->find("name");
    if (name == account->end() || !name->is_string()) return std::nullopt;
    const auto space = ns->get<std::string>();
    if (space.empty() || name->get<std::string>().empty()) return std::nullopt;
    return Principal{"system:serviceaccount:" + space + ":" + name->get<std::string>(),
                     {"system:serviceaccounts", "system:serviceaccounts:" + space},
                     space};
}

struct TrustedIssuers::Impl {
    struct Issuer {
        OidcIssuer options;
        Keys keys;  // guarded by mutex
        Clock::time_point last_read;
    };
    std::vector<Issuer> issuers;
    mutable std::mutex mutex;
    mutable std::unordered_map<std::string, std::pair<Principal, std::chrono::system_clock::time_point>> verified;

    // Reads an issuer's key set again; the last good set stays when that fails.
    void reload(Issuer& issuer) const {
        try {
            auto keys = read_key_set(issuer.options.jwks_file);
            std::lock_guard lock(mutex);
            issuer.keys = std::move(keys);
        } catch (const std::exception& error) {
            observe::log("warn", "issuer keys could not be read; keeping the last good ones",
                         {{"issuer", issuer.options.issuer}, {"error", error.what()}});
        }
        std::lock_guard lock(mutex);
        issuer.last_read = Clock::now();
    }

    // The keys a token with this kid may be verified with: that key alone when the set holds
    // it, every key for a token without kid. Empty for an unknown kid.
    Keys keys_for(Issuer& issuer, const std::string& kid) const {
        std::lock_guard lock(mutex);
        if (kid.empty()) return issuer.keys;
        for (auto& key : issuer.keys)
            if (key->kid() == kid) return {key};
        return {};
    }

    Principal principal_of(const Issuer& issuer, const json& claims, std::string& error) const {
        if (auto account = service_account_of(claims)) return *account;
        Principal principal{string_claim(claims, issuer.options.username_claim), {}, {}};
        if (principal.name.empty()) error = "token has no " + issuer.options.username_claim + " claim";
        if (auto groups = claims.find(issuer.options.groups_claim); groups != claims.end() && groups->is_array())
            for (auto& group : *groups)
                if (group.is_string() && principal.groups.size() < max_groups)
                    principal.groups.push_back(group.get<std::string>());
        return principal;
    }
};

TrustedIssuers::TrustedIssuers(std::vector<OidcIssuer> issuers) : impl_(std::make_unique<Impl>()) {
    for (auto& options : issuers) {
        auto keys = read_key_set(options.jwks_file);
        impl_->issuers.push_back({std::move(options), std::move(keys), Clock::now()});
    }
}

TrustedIssuers::~TrustedIssuers() = default;

bool TrustedIssuers::empty() const { return impl_->issuers.empty(); }

std::optional<Principal> TrustedIssuers::verify(std::string_view token, std::string& error) const {
    const auto now = std::chrono::system_clock::now();
    {
        std::lock_guard lock(impl_->mutex);
        if (auto it = impl_->verified.find(std::string(token)); it != impl_->verified.end()) {
            if (it->second.second >= now) return it->second.first;
            impl_->verified.erase(it);
        }
    }
    auto peeked = peek_jwt(token);
    if (!peeked) {
        error = token.size() > max_token_bytes ? "token too large" : "malformed token";
        return std::nullopt;
    }
    auto issuer = std::find_if(impl_->issuers.begin(), impl_->issuers.end(),
                               [&](auto& i) { return i.options.issuer == peeked->issuer; });
    if (issuer == impl_->issuers.end()) {
        error = "token issuer not trusted";
        return std::nullopt;
    }
    auto keys = impl_->keys_for(*issuer, peeked->kid);
    if (keys.empty()) {
        bool due;
        {
            std::lock_guard lock(impl_->mutex);
            due = Clock::now() - issuer->last_read > unknown_kid_interval;
        }
        if (due) impl_->reload(*issuer);  // the issuer may have rotated its key
        keys = impl_->keys_for(*issuer, peeked->kid);
        if (keys.empty()) {
            error = "token signed with a key its issuer does not list";
            return std::nullopt;
        }
    }
    auto& options = issuer->options;
    auto claims = verify_jwt(
        token, keys, {options.issuer, options.audiences, now, std::chrono::seconds(30), options.max_token_lifetime},
        error);
    if (!claims) return std::nullopt;
    auto principal = impl_->principal_of(*issuer, *claims, error);
    if (principal.name.empty()) return std::nullopt;
    const auto expires = std::chrono::system_clock::time_point(std::chrono::seconds((*claims)["exp"].get<long long>()));
    std::lock_guard lock(impl_->mutex);
    if (impl_->verified.size() >= max_cached_tokens) impl_->verified.clear();
    impl_->verified[std::string(token)] = {principal, expires};
    return principal;
}

void TrustedIssuers::refresh() {
    for (auto& issuer : impl_->issuers) impl_->reload(issuer);
}

}  // namespace berth::auth
