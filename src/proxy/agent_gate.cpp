#include "agent_gate.hpp"

#include <nlohmann/json.hpp>

#include "berth/net/reach.hpp"
#include "berth/oci/digest.hpp"
#include "berth/remote/challenge.hpp"

namespace berth::proxy {
namespace {

constexpr std::size_t max_decisions = 10000;
constexpr std::size_t max_token_answer = 64 << 10;
constexpr std::size_t max_access_answer = 4 << 10;
// The start of a verdict's message when no replica could be connected to at all.
constexpr std::string_view unreachable = "no replica reachable: ";

enum Result { allowed, denied, unavailable };
constexpr const char* result_names[] = {"allowed", "denied", "unavailable"};

Result result_of(const auth::Verdict& verdict) {
    if (verdict.allowed()) return allowed;
    return verdict.status == 503 ? unavailable : denied;
}

}  // namespace

AgentGate::AgentGate(net::Client& client, remote::Config replicas, DecisionTtl ttl, std::set<std::string> kept)
    : replicas_(client,
                [&] {
                    replicas.username.clear();
                    replicas.password.clear();
                    replicas.answer_challenges = false;
                    return replicas;
                }()),
      ttl_(ttl), kept_(std::move(kept)) {
    for (auto& url : replicas.urls) replica_addresses_.push_back(url.address);
}

auth::Verdict AgentGate::check(const std::string& authorization, const std::string& repository,
                               const std::string& origin) {
    // The credential is kept hashed: the table must not become a store of passwords and tokens.
    const auto key = oci::Digest::of(oci::DigestAlgorithm::sha256, authorization).hex() + repository;
    auto answer = [&](auth::Verdict verdict, bool cached) {
        count(verdict, cached);
        verdict.challenge = challenge_for(verdict.challenge, origin);
        return verdict;
    };
    std::optional<Remembered> remembered;
    {
        std::lock_guard lock(mutex_);
        if (auto it = decisions_.find(key); it != decisions_.end()) remembered = it->second;
    }
    const auto now = Clock::now();
    if (remembered && now - remembered->asked < ttl_.fresh) return answer(remembered->verdict, true);
    net::reach(net::upstream_party(""));
    auto verdict = ask(authorization, repository);
    // Through an outage of the replicas, what they last said holds a while longer.
    if (verdict.status == 503 && remembered && now - remembered->asked < ttl_.outage)
        return answer(remembered->verdict, true);
    if (verdict.status == 503 && verdict.message.starts_with(unreachable) && kept_.count(repository))
        return answer({}, false);
    if (verdict.status != 503) {
        std::lock_guard lock(mutex_);
        const auto oldest = std::max(ttl_.fresh, ttl_.outage);
        if (decisions_.size() >= max_decisions)
            std::erase_if(decisions_, [&](auto& e) { return now - e.second.asked >= oldest; });
        if (decisions_.size() >= max_decisions) decisions_.clear();
        decisions_[key] = {verdict, now};
    }
    return answer(std::move(verdict), false);
}

auth::Verdict AgentGate::ask(const std::string& authorization, const std::string& repository) {
    net::Headers headers;
    if (!authorization.empty()) headers.emplace_back("Authorization", authorization);
    const auto path = auth::access_target(repository);
    try {
        auto answer = replicas_.request("GET", path, "", max_access_answer, headers);
        if (answer.status == 401) return {401, answer.header("www-authenticate"), "authentication required"};
        if (answer.status == 403) return {403, {}, "access denied by the registry"};
        // Only an explicit allow lets a caller in: a 404 (a path the replica did not know) or any
        // other answer is no decision.
        const bool allowed = repository.empty() ? answer.status == 200
                                                : answer.status == 204 && answer.header(auth::access_header) == "pull";
        if (allowed) return {};
        return {503, {}, "the registry answered " + std::to_string(answer.status) + " when asked who may read"};
    } catch (const net::Error& error) {
        // Only no connection at all is an outage (the kept images' exemption); anything a replica
        // answered, or a caller could provoke (a header too long, a throttle), is not.
        const auto why = std::string("the registry could not be asked who may read: ") + error.what();
        return {503, {}, error.kind() == net::Error::Kind::connect ? std::string(unreachable) + why : why};
    } catch (const std::exception& error) {
        return {503, {}, std::string("the registry could not be asked who may read: ") + error.what()};
    }
}

auth::RelayedToken AgentGate::token(const std::string& authorization, const std::string& query) {
    net::reach(net::upstream_party(""));
    net::Headers headers;
    if (!authorization.empty()) headers.emplace_back("Authorization", authorization);
    try {
        auto answer =
            replicas_.request("GET", "/auth/token" + (query.empty() ? "" : "?" + query), "", max_token_answer, headers);
        return {answer.status, std::move(answer.body)};
    } catch (const std::exception& error) {
        return {503,
                nlohmann::json{
                    {"errors",
                     {{{"code", "UNAVAILABLE"},
                       {"message", std::string("the registry's token endpoint is out of reach: ") + error.what()}}}}}
                    .dump()};
    }
}

std::string AgentGate::challenge_for(const std::string& challenge, const std::string& origin) const {
    auto parsed = remote::parse_challenge(challenge);
    auto realm = parsed.params.find("realm");
    if (parsed.scheme != "bearer" || realm == parsed.params.end()) return challenge;
    try {
        auto url = net::parse_url(realm->second);
        bool theirs = false;
        for (auto& address : replica_addresses_) theirs = theirs || address == url.address;
        if (!theirs) return challenge;
    } catch (const std::invalid_argument&) {
        return challenge;
    }
    std::string out = "Bearer realm=\"" + origin + "/auth/token\"";
    for (auto& [name, value] : parsed.params)
        if (name != "realm") out += "," + name + "=\"" + value + "\"";
    return out;
}

void AgentGate::count(const auth::Verdict& verdict, bool cached) { ++decisions_counted_[result_of(verdict)][cached]; }

void AgentGate::write_metrics(observe::MetricsWriter& out) const {
    for (int result = 0; result < 3; ++result)
        for (int cached = 0; cached < 2; ++cached)
            out.add(observe::Metric::agent_authorizations_total,
                    {{"result", result_names[result]}, {"cached", cached ? "true" : "false"}},
                    static_cast<double>(decisions_counted_[result][cached]));
}

}  // namespace berth::proxy
