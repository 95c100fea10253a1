// Blobs from upstreams, fetched once however many ask: the first reader starts
// a fetch thread, every reader (the first too) streams from the scratch file
// as it fills, and the blob is committed and linked once its digest is right.
#include <nlohmann/json.hpp>
#include <thread>

#include "berth/oci/error.hpp"
#include "berth/oci/paths.hpp"
#include "berth/observe/log.hpp"
#include "berth/net/reach.hpp"
#include "berth/replication/cluster.hpp"
#include "berth/storage/filling_blob.hpp"
#include "proxy_impl.hpp"

namespace berth::proxy {
namespace {

// How long a reader waits for the upstream's answer to start.
constexpr auto answer_wait = std::chrono::seconds(30);
constexpr std::size_t piece_bytes = 1 << 20;

}  // namespace

std::optional<storage::OpenBlob> Proxy::fetch_blob(const std::string& repo, const oci::Digest& digest,
                                                   registry::Asker asker, registry::FetchIntake& intake) {
    auto [upstream, name] = impl_->find(repo);
    if (!upstream) return std::nullopt;
    net::reach(net::upstream_party(upstream->options.host));
    std::shared_ptr<BlobFlight> flight;
    for (bool confirmed = false; !flight;) {
        {
            std::lock_guard lock(impl_->flights_mutex);
            auto& slot = impl_->blob_flights[digest.str()];
            if (slot && (confirmed || slot->repos.count(repo))) {
                ++upstream->counters.coalesced;
                flight = slot;
                flight->repos.insert(repo);
            } else if (!slot) {
                // Linked since the caller looked (the fetch before this one ended): no new fetch.
                if (impl_->meta.has_link(repo, digest.str()))
                    if (auto blob = impl_->blobs.open(digest)) {
                        impl_->blob_flights.erase(digest.str());
                        return blob;
                    }
                slot = std::make_shared<BlobFlight>();
                slot->intake = &intake;
                slot->repos.insert(repo);
                ++upstream->counters.misses;
                ++impl_->running;
                std::thread(&Impl::run_flight, impl_.get(), std::ref(*upstream), name, repo, digest, slot, asker)
                    .detach();
                flight = slot;
            }
        }
        // Another repository's fetch of this blob is under way. Knowing a digest grants nothing:
        // this repository's own upstream must say it holds the blob before its reader shares those
        // bytes, or the blob is linked into it.
        if (!flight && !impl_->holds(*upstream, name, digest)) return std::nullopt;
        confirmed = true;
    }
    std::unique_lock lock(flight->mutex);
    if (impl_->peers && asker == registry::Asker::client) {
        // With fellow agents among the sources, the runtime gets a blob only once it is stored
        // whole and verified: a lying agent can slow a pull, never poison it. (Fellow agents,
        // who verify for themselves, follow the bytes as they arrive.)
        // Bounded by progress: a fetch that moves no byte for fetch_timeout is given up on here
        // (it ends on its own deadlines), so a stalled source never holds this thread for good.
        const auto patience = upstream->options.fetch_timeout;
        for (std::uint64_t seen = 0; !flight->finished;) {
            if (flight->started.wait_for(lock, patience, [&] { return flight->finished; })) break;
            const auto now = flight->filling ? flight->filling->readable() : 0;
            if (now == seen) throw oci::Error(oci::ErrorCode::unavailable, "the blob's fetch stopped moving");
            seen = now;
        }
        if (flight->refused) std::rethrow_exception(flight->refused);
        lock.unlock();
        return impl_->meta.has_link(repo, digest.str()) ? impl_->blobs.open(digest) : std::nullopt;
    }
    flight->started.wait_for(lock, answer_wait, [&] { return flight->filling || flight->ended; });
    if (flight->refused) std::rethrow_exception(flight->refused);
    if (!flight->filling || flight->filling->failed()) return std::nullopt;
    try {
        return flight->filling->reader();
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

bool Proxy::Impl::holds(UpstreamState& upstream, const std::string& name, const oci::Digest& digest) {
    try {
        remote::RegistryClient::Slot slot(upstream.remote, upstream.remote.deadline());
        auto head = upstream.remote.request("HEAD", oci::path::blob(name, digest.str()), remote::scope_of(name), 0);
        upstream.answered(head.status);
        return head.status == 200;
    } catch (const std::exception& error) {
        log_failure(upstream, name + "@" + digest.str(), error.what());
        return false;
    }
}

void Proxy::Impl::run_flight(UpstreamState& upstream, std::string name, std::string repo, oci::Digest digest,
                             std::shared_ptr<BlobFlight> flight, registry::Asker asker) {
    const auto key = digest.str();
    try {
        // The owning replica fetches for the whole cluster; this one streams from it.
        const bool done =
            cluster && asker == registry::Asker::client && fill_from_owner(upstream, repo, digest, *flight);
        if (!done) {
            remote::RegistryClient::Slot slot(upstream.remote, upstream.remote.deadline());
            if (!fill_from_store(upstream, name, digest, *flight)) {
                if (peers) fill_shared(upstream, name, digest, *flight);
                else fill_from_upstream(upstream, name, digest, *flight);
            }
        }
    } catch (const oci::Error& refusal) {
        // A quota refused it: nothing stored, and every reader hears why.
        std::lock_guard lock(flight->mutex);
        if (flight->filling) flight->filling->fail();
        flight->refused = std::current_exception();
        flight->ended = true;
    } catch (const std::exception& error) {
        log_failure(upstream, repo + "@" + key, error.what());
        std::lock_guard lock(flight->mutex);
        if (flight->filling) flight->filling->fail();
        flight->ended = true;
    }
    flight->started.notify_all();
    end_flight(*flight, digest);
}

bool Proxy::Impl::fill_from_owner(UpstreamState& upstream, const std::string& repo, const oci::Digest& digest,
                                  BlobFlight& flight) {
    const auto key = digest.str();
    auto owner = cluster->owner_of(key);
    if (!owner) return false;
    try {
        remote::Opened opened{cluster->open_peer(*owner, owner_request(oci::path::blob(repo, key))), nullptr};
        opened.head = &opened.exchange->read_head();
        if (opened.head->status != 200) return false;
        receive(upstream, opened, digest, flight, false);
        return true;
    } catch (const std::exception& error) {
        if (flight.filling) throw;  // bytes went out already: this fetch has failed
        observe::log("info", "owner replica did not answer; asking the upstream",
                     {{"owner", *owner}, {"error", error.what()}});
        return false;
    }
}

// Stored for another repository already: the upstream need only say this one has it too.
bool Proxy::Impl::fill_from_store(UpstreamState& upstream, const std::string& name, const oci::Digest& digest,
                                  BlobFlight& flight) {
    auto size = blobs.size(digest);
    if (!size) return false;
    auto head = upstream.remote.request("HEAD", oci::path::blob(name, digest.str()), remote::scope_of(name), 0);
    upstream.answered(head.status);
    if (head.status != 200 || head.content_length != *size) return false;
    admit(flight, digest, *size);
    auto blob = blobs.open(digest);
    if (!blob) return false;
    auto filling = std::make_shared<storage::FillingBlob>(std::move(*blob));
    filling->wrote(*size);
    filling->verified();
    {
        std::lock_guard lock(flight.mutex);
        flight.filling = filling;
    }
    flight.started.notify_all();
    return true;
}

void Proxy::Impl::fill_from_upstream(UpstreamState& upstream, const std::string& name, const oci::Digest& digest,
                                     BlobFlight& flight) {
    const auto started = Clock::now();
    auto opened = upstream.remote.open("GET", oci::path::blob(name, digest.str()), remote::scope_of(name), {},
                                       upstream.remote.deadline());
    upstream.answered(opened.head->status);
    ++upstream.counters.requests;
    upstream.counters.request_micros +=
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started).count();
    if (opened.head->status != 200)
        throw std::runtime_error("upstream answered " + std::to_string(opened.head->status));
    receive(upstream, opened, digest, flight, true);
}

// The flight is over: a verified blob is linked into every repository that read it, and its
// readers get the last byte.
void Proxy::Impl::end_flight(BlobFlight& flight, const oci::Digest& digest) {
    std::set<std::string> repos;
    {
        std::lock_guard lock(flights_mutex);
        blob_flights.erase(digest.str());
        repos = flight.repos;
    }
    if (flight.filling && !flight.filling->failed()) {
        try {
            flight.intake->link_fetched({repos.begin(), repos.end()}, digest);
        } catch (const std::exception& error) {
            observe::log("error", "cannot link a fetched blob", {{"digest", digest.str()}, {"error", error.what()}});
        }
        flight.filling->verified();
    }
    {
        std::lock_guard lock(flight.mutex);
        flight.finished = true;
    }
    flight.started.notify_all();
    std::lock_guard lock(flights_mutex);
    --running;
    flights_idle.notify_all();
}

void Proxy::Impl::receive(UpstreamState& upstream, remote::Opened& opened, const oci::Digest& digest,
                          BlobFlight& flight, bool from_upstream) {
    const auto& head = *opened.head;
    if (!head.content_length) throw std::runtime_error("no Content-Length for a blob");
    const auto size = *head.content_length;
    if (limits.max_blob_bytes && size > limits.max_blob_bytes)
        throw std::runtime_error("blob larger than limits.max_blob_bytes");
    admit(flight, digest, size);
    auto writer = blobs.write(digest.algorithm(), {size, limits.max_blob_bytes, limits.min_free_bytes});
    auto filling = writer.follow();
    {
        std::lock_guard lock(flight.mutex);
        flight.filling = filling;
    }
    flight.started.notify_all();

    // A trickle would hold the fetch (and its readers) for ever: after a
    // first fetch_timeout, the body must keep up min_bytes_per_second on
    // average, whatever size the upstream claims.
    const auto& options = upstream.options;
    const auto started = Clock::now();
    std::vector<char> piece(piece_bytes);
    while (auto n = opened.exchange->read_body(piece)) {
        const auto late =
            std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - started - options.fetch_timeout);
        if (late.count() > 0 &&
            writer.size() + n < options.min_bytes_per_second * static_cast<std::uint64_t>(late.count()))
            throw std::runtime_error("blob slower than the upstream's min_bytes_per_second");
        if (writer.size() + n > size) throw std::runtime_error("blob longer than its Content-Length");
        writer.write(piece.data(), n);
        if (from_upstream) upstream.counters.fetched_bytes += n;
    }
    if (writer.size() != size) throw std::runtime_error("blob shorter than its Content-Length");
    writer.commit(digest);
}

void Proxy::Impl::admit(BlobFlight& flight, const oci::Digest& digest, std::uint64_t size) {
    std::set<std::string> repos;
    {
        std::lock_guard lock(flights_mutex);
        repos = flight.repos;
    }
    for (auto& repo : repos) flight.intake->admit(repo, digest, size);
}

void Proxy::finish_fetches() {
    std::unique_lock lock(impl_->flights_mutex);
    impl_->flights_idle.wait(lock, [&] { return impl_->running == 0; });
}

}  // namespace berth::proxy
