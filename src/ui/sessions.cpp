#include "berth/ui/sessions.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <nlohmann/json.hpp>

#include "berth/oci/derived_keys.hpp"
#include "berth/oci/encoding.hpp"
#include "berth/oci/json.hpp"
#include "berth/replication/peer_service.hpp"

namespace berth::ui {
namespace {

std::int64_t now_seconds() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// The value of cookie `name` in a Cookie header ("a=1; b=2").
std::optional<std::string_view> cookie_value(std::string_view header, std::string_view name) {
    while (!header.empty()) {
        auto end = header.find(';');
        auto pair = header.substr(0, end);
        header = end == std::string_view::npos ? std::string_view{} : header.substr(end + 1);
        while (!pair.empty() && pair.front() == ' ') pair.remove_prefix(1);
        if (pair.starts_with(name) && pair.size() > name.size() && pair[name.size()] == '=')
            return pair.substr(name.size() + 1);
    }
    return std::nullopt;
}

}  // namespace

std::string Sessions::key_for(const Options& options, const replication::PeerService* peers) {
    constexpr std::string_view purpose = "berth ui session";
    if (!options.session_secret.empty()) return oci::DerivedKeys(options.session_secret).key(purpose);
    return peers ? peers->derived_key(purpose) : std::string();
}

Sessions::Sessions(std::string key, std::chrono::seconds lifetime)
    : key_(key.empty() ? oci::random_bytes(32) : std::move(key)), lifetime_(lifetime) {}

std::string Sessions::seal(std::string_view payload) const {
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()),
         reinterpret_cast<const unsigned char*>(payload.data()), payload.size(), mac, &length);
    return oci::base64url(std::string(reinterpret_cast<const char*>(mac), length));
}

std::string Sessions::sign_in(const auth::Principal& principal, bool secure, std::optional<std::int64_t> expires,
                              const std::string& generation) const {
    const auto now = now_seconds();
    const auto until = std::min(now + lifetime_.count(), expires.value_or(now + lifetime_.count()));
    const auto payload = oci::base64url(nlohmann::json{
        {"u", principal.name}, {"g", principal.groups}, {"n", principal.ns}, {"e", until}, {"c", generation}}
                                            .dump());
    // No Path: the cookie's path is the folder of /ui/login as the browser saw it, prefix and all.
    return std::string(session_cookie) + "=" + payload + "." + seal(payload) +
           "; Max-Age=" + std::to_string(std::max<std::int64_t>(0, until - now)) + "; HttpOnly; SameSite=Strict" +
           (secure ? "; Secure" : "");
}

std::string Sessions::sign_out(bool secure) {
    return std::string(session_cookie) + "=; Max-Age=0; HttpOnly; SameSite=Strict" + (secure ? "; Secure" : "");
}

std::optional<Sessions::Session> Sessions::session(std::string_view cookie_header) const {
    auto value = cookie_value(cookie_header, session_cookie);
    if (!value || value->size() > 4096) return std::nullopt;
    const auto dot = value->find('.');
    if (dot == std::string_view::npos) return std::nullopt;
    const auto payload = value->substr(0, dot);
    if (!oci::equal_secrets(value->substr(dot + 1), seal(payload))) return std::nullopt;
    auto decoded = oci::base64url_decode(payload);
    if (!decoded) return std::nullopt;
    auto doc = oci::parse_json(*decoded);
    try {
        if (doc.at("e").get<std::int64_t>() <= now_seconds()) return std::nullopt;
        auth::Principal principal{doc.at("u").get<std::string>(), doc.at("g").get<std::vector<std::string>>(),
                                  doc.at("n").get<std::string>()};
        if (principal.anonymous()) return std::nullopt;
        return Session{std::move(principal), doc.value("c", std::string())};
    } catch (const nlohmann::json::exception&) {
        return std::nullopt;  // sealed here, so only an older berth's shape
    }
}

}  // namespace berth::ui
