#include "issuers.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <unordered_map>

#include "berth/observe/log.hpp"
#include "berth/oci/encoding.hpp"
#include "berth/oci/json.hpp"
#include "issuer_documents.hpp"
#include "jwt.hpp"
#include "key_source.hpp"

namespace berth::auth {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using Keys = std::vector<std::shared_ptr<JwtKey>>;

constexpr std::size_t max_cached_tokens = 10000;
// An unknown kid makes the key set be read again at most this often: a stream of
// forged kids must not turn into a stream of requests to the issuer.
constexpr auto unknown_kid_interval = std::chrono::seconds(10);

std::filesystem::path cache_file_of(const std::string& dir, const std::string& issuer) {
    unsigned char digest[32];
    unsigned size = 0;
    EVP_Digest(issuer.data(), issuer.size(), digest, &size, EVP_sha256(), nullptr);
    return std::filesystem::path(dir) / (oci::hex(std::string_view(reinterpret_cast<char*>(digest), 8)) + ".json");
}

void write_atomically(const std::filesystem::path& file, const std::string& text) {
    std::filesystem::create_directories(file.parent_path());
    auto temporary = file;
    temporary += ".new";
    {
        std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
        out << text;
        if (!out.flush()) throw std::runtime_error("cannot write " + temporary.string());
    }
    std::filesystem::rename(temporary, file);
}

}  // namespace

struct TrustedIssuers::Impl {
    struct Issuer {
        OidcIssuer options;
        std::filesystem::path cache_file;  // discovery issuers: the last good set, across restarts
        Keys keys;                         // guarded by mutex
        Clock::time_point last_read;       // guarded by mutex
        bool wanted = false;               // guarded by mutex: the refresher should read it now
        std::uint64_t refreshed = 0, failed = 0;
    };
    std::vector<std::unique_ptr<Issuer>> issuers;
    std::unique_ptr<net::Client> client;  // with discovery issuers only
    mutable std::mutex mutex;
    mutable std::unordered_map<std::string, std::pair<Principal, std::chrono::system_clock::time_point>> verified;
    // Discovery issuers are read on a thread of its own: an issuer out of reach never holds a request.
    std::condition_variable wake;
    bool stopping = false;
    std::thread refresher;

    // Reads an issuer's key set again; the last good set stays when that fails.
    void reload(Issuer& issuer) {
        const auto& options = issuer.options;
        try {
            auto text = key_set_text(options, client.get());
            auto keys = parse_key_set(text, options.jwks_file.empty() ? options.discovery_url : options.jwks_file);
            if (!issuer.cache_file.empty()) write_atomically(issuer.cache_file, text);
            std::lock_guard lock(mutex);
            issuer.keys = std::move(keys);
            ++issuer.refreshed;
        } catch (const std::exception& error) {
            observe::log("warn", "issuer keys could not be read; keeping the last good ones",
                         {{"issuer", options.issuer}, {"error", error.what()}});
            std::lock_guard lock(mutex);
            ++issuer.failed;
        }
        std::lock_guard lock(mutex);
        issuer.last_read = Clock::now();
    }

    void refresh_wanted() {
        std::unique_lock lock(mutex);
        while (!stopping) {
            wake.wait(lock, [&] {
                return stopping || std::any_of(issuers.begin(), issuers.end(), [](auto& i) { return i->wanted; });
            });
            for (auto& issuer : issuers) {
                if (stopping || !issuer->wanted) continue;
                issuer->wanted = false;
                lock.unlock();
                reload(*issuer);
                lock.lock();
            }
        }
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

    // An unknown kid: the issuer may have rotated its key. A file is read at once; an issuer
    // asked over the network is read by the refresher, and this token refused meanwhile.
    Keys read_again(Issuer& issuer, const std::string& kid) {
        {
            std::lock_guard lock(mutex);
            if (Clock::now() - issuer.last_read < unknown_kid_interval) return {};
            if (!issuer.options.discovery_url.empty()) {
                issuer.wanted = true;
                issuer.last_read = Clock::now();
                wake.notify_all();
                return {};
            }
        }
        reload(issuer);
        return keys_for(issuer, kid);
    }

    // A discovery issuer starts from the set it last fetched, and is asked again at once.
    void start_from_cache(Issuer& issuer) {
        try {
            if (std::filesystem::exists(issuer.cache_file))
                issuer.keys = parse_key_set(read_bounded_file(issuer.cache_file.string(), max_key_set_bytes),
                                            issuer.cache_file.string());
        } catch (const std::exception& error) {
            observe::log("warn", "kept issuer keys unusable",
                         {{"issuer", issuer.options.issuer}, {"error", error.what()}});
        }
        issuer.wanted = true;
    }
};

TrustedIssuers::TrustedIssuers(std::vector<OidcIssuer> issuers, const std::string& cache_dir)
    : impl_(std::make_unique<Impl>()) {
    const bool discovery =
        std::any_of(issuers.begin(), issuers.end(), [](auto& issuer) { return !issuer.discovery_url.empty(); });
    if (discovery) impl_->client = std::make_unique<net::Client>();
    for (auto& options : issuers) {
        auto issuer = std::make_unique<Impl::Issuer>();
        issuer->options = std::move(options);
        issuer->last_read = Clock::now();
        if (issuer->options.discovery_url.empty()) {
            issuer->keys = parse_key_set(key_set_text(issuer->options, nullptr), issuer->options.jwks_file);
        } else {
            if (!cache_dir.empty()) issuer->cache_file = cache_file_of(cache_dir, issuer->options.issuer);
            impl_->start_from_cache(*issuer);
        }
        impl_->issuers.push_back(std::move(issuer));
    }
    if (discovery) impl_->refresher = std::thread([impl = impl_.get()] { impl->refresh_wanted(); });
}

TrustedIssuers::~TrustedIssuers() {
    {
        std::lock_guard lock(impl_->mutex);
        impl_->stopping = true;
    }
    impl_->wake.notify_all();
    if (impl_->refresher.joinable()) impl_->refresher.join();
}

bool TrustedIssuers::empty() const { return impl_->issuers.empty(); }

std::optional<IssuedIdentity> TrustedIssuers::verify(std::string_view token, std::string& error) const {
    const auto now = std::chrono::system_clock::now();
    auto identity = [](const Principal& principal, std::chrono::system_clock::time_point expires) {
        return IssuedIdentity{principal,
                              std::chrono::duration_cast<std::chrono::seconds>(expires.time_since_epoch()).count()};
    };
    {
        std::lock_guard lock(impl_->mutex);
        if (auto it = impl_->verified.find(std::string(token)); it != impl_->verified.end()) {
            if (it->second.second >= now) return identity(it->second.first, it->second.second);
            impl_->verified.erase(it);
        }
    }
    auto peeked = peek_jwt(token);
    if (!peeked) {
        error = token.size() > max_token_bytes ? "token too large" : "malformed token";
        return std::nullopt;
    }
    auto found = std::find_if(impl_->issuers.begin(), impl_->issuers.end(),
                              [&](auto& i) { return i->options.issuer == peeked->issuer; });
    if (found == impl_->issuers.end()) {
        error = "token issuer not trusted";
        return std::nullopt;
    }
    auto& issuer = **found;
    auto keys = impl_->keys_for(issuer, peeked->kid);
    if (keys.empty()) keys = impl_->read_again(issuer, peeked->kid);
    if (keys.empty()) {
        error = "token signed with a key its issuer does not list";
        return std::nullopt;
    }
    auto& options = issuer.options;
    auto claims = verify_jwt(
        token, keys, {options.issuer, options.audiences, now, std::chrono::seconds(30), options.max_token_lifetime},
        error);
    if (!claims) return std::nullopt;
    auto principal = principal_of(issuer.options, *claims, error);
    if (principal.name.empty()) return std::nullopt;
    const auto expires = std::chrono::system_clock::time_point(std::chrono::seconds((*claims)["exp"].get<long long>()));
    std::lock_guard lock(impl_->mutex);
    if (impl_->verified.size() >= max_cached_tokens) impl_->verified.clear();
    impl_->verified[std::string(token)] = {principal, expires};
    return identity(principal, expires);
}

void TrustedIssuers::refresh() {
    for (auto& issuer : impl_->issuers) impl_->reload(*issuer);
}

void TrustedIssuers::write_metrics(observe::MetricsWriter& out) const {
    std::lock_guard lock(impl_->mutex);
    for (auto& issuer : impl_->issuers) {
        out.add(observe::Metric::auth_issuer_key_refreshes_total,
                {{"issuer", issuer->options.issuer}, {"result", "ok"}}, static_cast<double>(issuer->refreshed));
        out.add(observe::Metric::auth_issuer_key_refreshes_total,
                {{"issuer", issuer->options.issuer}, {"result", "failed"}}, static_cast<double>(issuer->failed));
    }
}

}  // namespace berth::auth
