#include "untagged.hpp"

#include <algorithm>
#include <span>
#include <unordered_map>

#include "berth/oci/manifest.hpp"
#include "berth/storage/events.hpp"
#include "berth/storage/meta_store.hpp"

namespace berth::registry {

namespace {

// Tombstones are committed this many at a time: the write lock is held for
// one chunk, never for a whole repository.
constexpr std::size_t chunk = 512;

struct Node {
    std::uint64_t fp = 0;
    storage::Stamp stamp;
    std::uint64_t subject = 0;            // fingerprint of the subject; 0: none
    std::vector<std::uint64_t> children;  // an index's manifests
    std::string digest;                   // kept for those that may go
    bool kept = false;
    std::size_t parents = 0;  // not kept, not gone yet: indexes listing it and its subject
};

std::vector<std::uint64_t> children_of(const storage::ManifestRecord& record) {
    std::vector<std::uint64_t> out;
    // Only indexes list manifests; most manifests are not parsed at all.
    if (record.bytes.find("\"manifests\"") == std::string::npos) return out;
    try {
        for (auto& child : oci::parse_manifest(record.bytes, record.media_type).manifests)
            out.push_back(fingerprint(child.digest.str()));
    } catch (const std::exception&) {
        // Valid when stored; one that no longer parses lists nothing.
    }
    return out;
}

// The repository's live manifests and what hangs off each: an index's children and a
// manifest's referrers.
struct Graph {
    std::vector<Node> nodes;
    std::unordered_map<std::uint64_t, std::size_t> by_fp;
    std::unordered_multimap<std::uint64_t, std::size_t> referrers;  // by subject

    template <typename Visit>
    void each_dependent(const Node& node, Visit visit) const {
        for (auto child : node.children)
            if (auto it = by_fp.find(child); it != by_fp.end()) visit(it->second);
        auto [first, last] = referrers.equal_range(node.fp);
        for (auto it = first; it != last; ++it) visit(it->second);
    }

    // Keeps what hangs off the nodes in work, and what hangs off that.
    void keep_dependents(std::vector<std::size_t> work) {
        while (!work.empty()) {
            auto i = work.back();
            work.pop_back();
            each_dependent(nodes[i], [&](std::size_t d) {
                if (!nodes[d].kept) {
                    nodes[d].kept = true;
                    work.push_back(d);
                }
            });
        }
    }
};

Graph read_graph(storage::MetaStore& meta, const UntaggedSweep& sweep) {
    auto tagged = [&](std::uint64_t fp) { return std::binary_search(sweep.tagged.begin(), sweep.tagged.end(), fp); };
    Graph g;
    meta.visit_manifests(sweep.repo, [&](const std::string& digest, const storage::ManifestRecord& record) {
        Node node;
        node.fp = fingerprint(digest);
        node.stamp = record.stamp;
        if (!record.subject.empty()) node.subject = fingerprint(record.subject);
        node.children = children_of(record);
        node.kept = tagged(node.fp) || storage::HybridClock::physical_ms(record.stamp.clock) > sweep.cutoff_ms;
        if (!node.kept) node.digest = digest;
        g.by_fp.emplace(node.fp, g.nodes.size());
        g.nodes.push_back(std::move(node));
    });
    for (std::size_t i = 0; i < g.nodes.size(); ++i)
        if (g.nodes[i].subject) g.referrers.emplace(g.nodes[i].subject, i);
    std::vector<std::size_t> kept;
    for (std::size_t i = 0; i < g.nodes.size(); ++i)
        if (g.nodes[i].kept) kept.push_back(i);
    g.keep_dependents(std::move(kept));
    return g;
}

// An index pushed (or replicated) since the log entry `seen` keeps what it lists: it checked
// them under the write lock the caller holds.
void keep_listed_since(Graph& g, storage::MetaStore& meta, const std::string& repo, std::uint64_t& seen) {
    for (std::vector<storage::LogEntry> page; !(page = meta.read_log(seen, 1000)).empty();)
        for (auto& entry : page) {
            seen = entry.sequence;
            auto event = storage::Event::parse(entry.event);
            if (!event || event->type != storage::Event::Type::manifest || event->repo != repo) continue;
            auto record = meta.manifest(repo, event->digest);
            if (!record || record->deleted) continue;
            std::vector<std::size_t> listed;
            for (auto child : children_of(*record))
                if (auto it = g.by_fp.find(child); it != g.by_fp.end() && !g.nodes[it->second].kept) {
                    g.nodes[it->second].kept = true;
                    listed.push_back(it->second);
                }
            g.keep_dependents(std::move(listed));
        }
}

// Tombstones the nodes of `chunk` that may still go, in one commit; returns those that went.
std::vector<std::size_t> tombstone(Graph& g, storage::MetaStore& meta, storage::HybridClock& clock,
                                   const std::string& replica_id, const UntaggedSweep& sweep, std::uint64_t& seen,
                                   std::span<const std::size_t> chunk) {
    std::vector<std::size_t> committed;
    auto lock = meta.lock_writes();
    keep_listed_since(g, meta, sweep.repo, seen);
    storage::MetaStore::Batch batch("retention");
    const storage::Stamp stamp{clock.now(), replica_id};
    for (auto n : chunk) {
        auto& node = g.nodes[n];
        if (node.kept) continue;
        auto current = meta.manifest(sweep.repo, node.digest);
        if (!current || current->deleted || current->stamp != node.stamp) continue;  // changed since
        batch.tombstone_manifest(sweep.repo, node.digest, &*current, stamp);
        committed.push_back(n);
    }
    if (committed.empty()) return committed;
    meta.commit(batch, storage::MetaStore::Durability::deferred);
    lock.unlock();
    meta.sync();
    return committed;
}

}  // namespace

std::uint64_t fingerprint(std::string_view digest) {
    std::uint64_t h = 14695981039346656037ull;  // FNV-1a
    for (unsigned char c : digest) h = (h ^ c) * 1099511628211ull;
    return h ? h : 1;  // 0 means "no subject"
}

std::size_t sweep_untagged(storage::MetaStore& meta, storage::HybridClock& clock, const std::string& replica_id,
                           UntaggedSweep sweep, const std::function<void(const std::string& digest)>& gone) {
    std::sort(sweep.tagged.begin(), sweep.tagged.end());
    // Indexes pushed after the manifests were read are found in the log from here.
    auto seen = meta.log_head();
    auto g = read_graph(meta, sweep);

    // Parents first: a node is ready once none of its parents is left.
    for (auto& node : g.nodes)
        if (!node.kept) g.each_dependent(node, [&](std::size_t d) { ++g.nodes[d].parents; });
    std::vector<std::size_t> ready;
    for (std::size_t i = 0; i < g.nodes.size(); ++i)
        if (!g.nodes[i].kept && g.nodes[i].parents == 0) ready.push_back(i);

    std::size_t count = 0;
    while (!ready.empty()) {
        std::vector<std::size_t> went, next;
        for (std::size_t start = 0; start < ready.size(); start += chunk) {
            const std::span<const std::size_t> part(ready.data() + start, std::min(ready.size() - start, chunk));
            if (sweep.dry_run) {
                went.insert(went.end(), part.begin(), part.end());
                continue;
            }
            auto committed = tombstone(g, meta, clock, replica_id, sweep, seen, part);
            went.insert(went.end(), committed.begin(), committed.end());
        }
        for (auto i : went) {
            gone(g.nodes[i].digest);
            ++count;
            g.each_dependent(g.nodes[i], [&](std::size_t d) {
                if (!g.nodes[d].kept && --g.nodes[d].parents == 0) next.push_back(d);
            });
        }
        ready = std::move(next);
    }
    return count;
}

}  // namespace berth::registry
