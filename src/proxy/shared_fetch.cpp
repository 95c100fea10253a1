// The node agent's blob fetch with fellow agents (agent.peers; agent_peers.hpp): this agent's
// parents in the blob's tree first, then the replicas. Each source takes over at the offset the
// last one reached (a Range request), so an agent that dies or stalls mid-blob costs the fetch one
// retry, not the bytes already in. Bytes of the wrong digest distrust every agent that sent some,
// and the blob is fetched once more from the replicas alone.
#include <nlohmann/json.hpp>

#include "berth/oci/paths.hpp"
#include "berth/observe/log.hpp"
#include "berth/storage/filling_blob.hpp"
#include "proxy_impl.hpp"

namespace berth::proxy {
namespace {

constexpr std::size_t piece_bytes = 1 << 20;

// The source answered something other than the bytes asked for: the next one is asked.
struct SourceFailed : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// The bytes an answer carries from `offset` on, and the blob's whole size.
std::pair<std::uint64_t, std::uint64_t> extent(const net::ResponseHead& head, std::uint64_t offset) {
    if (head.status == 200 && head.content_length) return {0, *head.content_length};
    if (head.status != 206) throw SourceFailed("answered " + std::to_string(head.status));
    // bytes START-END/TOTAL
    const auto range = head.header("Content-Range");
    unsigned long long start = 0, end = 0, total = 0;
    if (std::sscanf(range.c_str(), "bytes %llu-%llu/%llu", &start, &end, &total) != 3 || start != offset ||
        end + 1 != total || !head.content_length || *head.content_length != total - start)
        throw SourceFailed("answered a range other than the one asked for");
    return {start, total};
}

// One blob being put together from several sources.
struct Assembly {
    Proxy::Impl& impl;
    BlobFlight& flight;
    const oci::Digest& digest;
    std::optional<storage::BlobWriter> writer;
    std::uint64_t size = 0;

    std::uint64_t offset() const { return writer ? writer->size() : 0; }
    bool whole() const { return writer && writer->size() == size; }

    // Reads the answer into the blob; counts its bytes into `counted`. A trickle is a failed
    // source: after fetch_timeout the answer must keep up min_bytes_per_second on average.
    void take(remote::Opened& opened, std::atomic<std::uint64_t>& counted, const Upstream& pace, bool agent) {
        auto [start, total] = extent(*opened.head, offset());
        if (!writer) {
            // What a fellow agent claims is checked before anything is set aside for it: a
            // size the store refuses is that source's failure, not the blob's.
            // An empty blob would have nothing to hold back from the agents following it.
            if (total == 0 && agent) throw SourceFailed("announced an empty blob");
            if (impl.limits.max_blob_bytes && total > impl.limits.max_blob_bytes)
                throw SourceFailed("announced a blob larger than limits.max_blob_bytes");
            impl.admit(flight, digest, total);
            size = total;
            writer.emplace(
                impl.blobs.write(digest.algorithm(), {total, impl.limits.max_blob_bytes, impl.limits.min_free_bytes}));
            auto filling = writer->follow();
            {
                std::lock_guard lock(flight.mutex);
                flight.filling = filling;
            }
            flight.started.notify_all();
        } else if (total != size) {
            throw SourceFailed("announced another size");
        }
        std::vector<char> piece(piece_bytes);
        // A whole answer after a part from elsewhere: its first bytes are here already.
        for (auto skip = offset() - start; skip > 0;) {
            auto n = opened.exchange->read_body({piece.data(), std::min<std::uint64_t>(skip, piece.size())});
            if (n == 0) throw SourceFailed("ended early");
            skip -= n;
        }
        const auto started = std::chrono::steady_clock::now();
        const auto from = offset();
        while (auto n = opened.exchange->read_body(piece)) {
            if (writer->size() + n > size) throw SourceFailed("sent more than the blob");
            writer->write(piece.data(), n);
            counted += n;
            const auto late = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() -
                                                                               started - pace.fetch_timeout);
            if (late.count() > 0 &&
                offset() - from < pace.min_bytes_per_second * static_cast<std::uint64_t>(late.count()))
                throw SourceFailed("slower than min_bytes_per_second");
        }
        if (!whole()) throw SourceFailed("ended early");
    }
};

}  // namespace

void Proxy::Impl::fill_shared(UpstreamState& upstream, const std::string& name, const oci::Digest& digest,
                              BlobFlight& flight) {
    auto sources = peers->sources(digest.str());
    for (int attempt = 0;; ++attempt) {
        Assembly blob{*this, flight, digest, std::nullopt, 0};
        std::vector<std::string> senders;
        for (auto& source : sources) {
            const auto before = blob.offset();
            try {
                auto opened = peers->open(source, name, digest, before);
                blob.take(opened, peers->bytes_from_agents, upstream.options, true);
                senders.push_back(source);
                break;
            } catch (const SourceFailed& error) {
                peers->failed(AgentPeers::Failure::refused);
                observe::log("info", "fellow agent did not give the blob; asking the next source",
                             {{"agent", source}, {"digest", digest.str()}, {"error", error.what()}});
            } catch (const net::Error& error) {
                peers->failed(AgentPeers::Failure::unreachable);
                observe::log("info", "fellow agent unreachable or stalled; asking the next source",
                             {{"agent", source}, {"digest", digest.str()}, {"error", error.what()}});
            }
            if (blob.offset() > before) senders.push_back(source);
        }
        bool restart = false;
        if (!blob.whole()) {
            const auto path = oci::path::blob(name, digest.str());
            net::Headers range;
            if (blob.offset()) range.emplace_back("Range", "bytes=" + std::to_string(blob.offset()) + "-");
            auto opened = upstream.remote.open("GET", path, remote::scope_of(name), range, upstream.remote.deadline());
            upstream.answered(opened.head->status);
            try {
                blob.take(opened, upstream.counters.fetched_bytes, upstream.options, false);
            } catch (const SourceFailed& error) {
                // The replicas disagree with what fellow agents announced (its size): theirs is the
                // blob. Without agents in it, the replicas' own answer was wrong.
                if (senders.empty() || attempt > 0) throw std::runtime_error(error.what());
                restart = true;
            }
        }
        try {
            if (restart) throw storage::DigestMismatch("fellow agents announced another blob than the replicas");
            blob.writer->commit(digest);
            return;
        } catch (const storage::DigestMismatch&) {
            if (senders.empty() || attempt > 0) throw;
            for (auto& sender : senders) {
                peers->distrust(sender);
                peers->failed(AgentPeers::Failure::corrupt);
                observe::log("warning", "fellow agent served bytes of another digest; distrusted, fetching again",
                             {{"agent", sender}, {"digest", digest.str()}});
            }
            std::lock_guard lock(flight.mutex);
            if (flight.filling) flight.filling->fail();  // the agents following these bytes go elsewhere
        }
        sources.clear();
    }
}

}  // namespace berth::proxy
