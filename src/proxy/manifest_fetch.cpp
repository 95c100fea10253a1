// Manifests from upstreams: one request per repository and reference at a
// time on this replica, delegated to the owning replica when there are several.
#include <nlohmann/json.hpp>

#include "berth/oci/paths.hpp"
#include "berth/observe/log.hpp"
#include "berth/oci/media_types.hpp"
#include "berth/oci/names.hpp"
#include "berth/net/reach.hpp"
#include "berth/replication/cluster.hpp"
#include "answers.hpp"
#include "proxy_impl.hpp"

namespace berth::proxy {
namespace {

using registry::ManifestAnswer;
using Status = ManifestAnswer::Status;

// The bytes answer the reference: by digest they hash to it; by tag, any
// digest the upstream claims must be theirs.
std::optional<registry::UpstreamManifest> verified(const net::Response& response, const std::string& reference) {
    auto wanted = oci::Digest::parse(reference);
    auto claimed = oci::Digest::parse(response.header("docker-content-digest"));
    auto algorithm = wanted ? wanted->algorithm() : oci::DigestAlgorithm::sha256;
    auto digest = oci::Digest::of(algorithm, response.body);
    if (wanted && digest != *wanted) return std::nullopt;
    if (claimed && claimed->algorithm() == algorithm && *claimed != digest) return std::nullopt;
    return registry::UpstreamManifest{digest, answers::media_type_of(response.header("content-type"), response.body),
                                      response.body};
}

}  // namespace

registry::ManifestAnswer Proxy::fetch_manifest(const std::string& repo, const std::string& reference,
                                               const std::optional<std::string>& cached, registry::Asker asker) {
    auto [upstream, name] = impl_->find(repo);
    if (!upstream) return {};
    const bool by_tag = reference.find(':') == std::string::npos;
    const auto key = repo + '\0' + reference;
    if (by_tag && cached) {
        std::lock_guard lock(upstream->checked_mutex);
        auto it = upstream->checked.find(key);
        if (it != upstream->checked.end() && Clock::now() - it->second < upstream->options.check_interval)
            return {Status::current, std::nullopt};
    }
    net::reach(net::upstream_party(upstream->options.host));
    // One request for all who ask at once.
    std::shared_ptr<ManifestFlight> flight;
    bool leader = false;
    {
        std::lock_guard lock(impl_->flights_mutex);
        auto& slot = impl_->manifest_flights[key];
        if (!slot) {
            slot = std::make_shared<ManifestFlight>();
            leader = true;
        } else {
            ++upstream->counters.coalesced;
        }
        flight = slot;
    }
    if (!leader) {
        // The leader asks the owning replica, then the upstream, each within its deadline.
        std::unique_lock lock(flight->mutex);
        if (!flight->done_cv.wait_for(lock, 2 * upstream->options.fetch_timeout, [&] { return flight->done; }))
            return {Status::unreachable, std::nullopt};
        return flight->answer;
    }
    ManifestAnswer answer;
    try {
        answer = impl_->manifest_now(*upstream, name, repo, reference, cached, asker);
    } catch (const std::exception& error) {
        impl_->log_failure(*upstream, repo + ":" + reference, error.what());
    }
    if (answer.status == Status::current || answer.status == Status::fetched) {
        std::lock_guard lock(upstream->checked_mutex);
        if (upstream->checked.size() > 100000) upstream->checked.clear();  // a bound; they are re-checked once
        upstream->checked[key] = Clock::now();
    }
    if (answer.status == Status::fetched) ++upstream->counters.misses;
    {
        std::lock_guard lock(impl_->flights_mutex);
        impl_->manifest_flights.erase(key);
    }
    {
        std::lock_guard lock(flight->mutex);
        flight->answer = answer;
        flight->done = true;
    }
    flight->done_cv.notify_all();
    return answer;
}

std::optional<registry::TagPage> Proxy::list_tags(const std::string& repo, std::size_t limit, const std::string& last) {
    auto [upstream, name] = impl_->find(repo);
    if (!upstream) return std::nullopt;
    net::reach(net::upstream_party(upstream->options.host));
    try {
        auto target = oci::path::tags(name) + "?n=" + std::to_string(limit);
        if (!last.empty()) target += "&last=" + net::query_escape(last);
        auto response = upstream->remote.request("GET", target, remote::scope_of(name), answers::max_list_bytes);
        if (response.status != 200) return std::nullopt;
        auto list = answers::parse_tag_list(response.body, !response.header("link").empty(), last, limit);
        if (!list) throw std::runtime_error("tag list is not a JSON object within bounds");
        return registry::TagPage{std::move(list->tags), list->more};
    } catch (const std::exception& error) {
        impl_->log_failure(*upstream, repo + " tags", error.what());
        return std::nullopt;
    }
}

registry::ManifestAnswer Proxy::Impl::manifest_now(UpstreamState& upstream, const std::string& name,
                                                   const std::string& repo, const std::string& reference,
                                                   const std::optional<std::string>& cached, registry::Asker asker) {
    auto answer_from = [&](const net::Response& response) -> ManifestAnswer {
        if (response.status == 404) return {Status::missing, std::nullopt};
        if (response.status != 200) throw std::runtime_error("answered " + std::to_string(response.status));
        auto manifest = verified(response, reference);
        if (!manifest) throw std::runtime_error("manifest does not match its digest");
        if (cached && manifest->digest.str() == *cached) return {Status::current, std::nullopt};
        return {Status::fetched, std::move(manifest)};
    };
    // The owning replica asks the upstream for the whole cluster.
    if (cluster && asker == registry::Asker::client) {
        if (auto owner = cluster->owner_of(repo + '\0' + reference)) {
            try {
                return answer_from(cluster->ask_peer(
                    *owner, owner_request(oci::path::manifest(repo, reference), remote::accept_manifests()),
                    limits.max_manifest_bytes));
            } catch (const std::exception& error) {
                observe::log("info", "owner replica did not answer; asking the upstream",
                             {{"owner", *owner}, {"error", error.what()}});
            }
        }
    }
    const auto target = oci::path::manifest(name, reference);
    remote::RegistryClient::Slot slot(upstream.remote, upstream.remote.deadline());
    const auto started = Clock::now();
    struct Timing {
        UpstreamState& upstream;
        Clock::time_point started;
        ~Timing() {
            ++upstream.counters.requests;
            upstream.counters.request_micros +=
                std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started).count();
        }
    } timing{upstream, started};
    if (cached && reference.find(':') == std::string::npos) {
        // One HEAD says whether the tag moved; only then is the manifest fetched.
        auto head = upstream.remote.request("HEAD", target, remote::scope_of(name), 0, remote::accept_manifests());
        upstream.answered(head.status);
        if (head.status == 404) return {Status::missing, std::nullopt};
        if (head.status >= 500 || head.status == 429) return {Status::unreachable, std::nullopt};
        if (head.status == 200 && head.header("docker-content-digest") == *cached)
            return {Status::current, std::nullopt};
    }
    auto response = upstream.remote.request("GET", target, remote::scope_of(name), limits.max_manifest_bytes,
                                            remote::accept_manifests());
    upstream.answered(response.status);
    if (response.status >= 500 || response.status == 429) {
        log_failure(upstream, repo + ":" + reference, "answered " + std::to_string(response.status));
        return {Status::unreachable, std::nullopt};
    }
    auto answer = answer_from(response);
    if (answer.status == Status::fetched) upstream.counters.fetched_bytes += response.body.size();
    return answer;
}

}  // namespace berth::proxy
