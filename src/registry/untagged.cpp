#include "untagged.hpp"

#include <algorithm>
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

}  // namespace

std::uint64_t fingerprint(std::string_view digest) {
    std::uint64_t h = 14695981039346656037ull;  // FNV-1a
    for (unsigned char c : digest) h = (h ^ c) * 1099511628211ull;
    return h ? h : 1;  // 0 means "no subject"
}

std::size_t sweep_untagged(storage::MetaStore& meta, storage::HybridClock& clock, const std::string& replica_id,
                           UntaggedSweep sweep, const std::function<void(const std::string& digest)>& gone) {
    std::sort(sweep.tagged.begin(), sweep.tagged.end());
    auto tagged = [&](std::uint64_t fp) { return std::binary_search(sweep.tagged.begin(), sweep.tagged.end(), fp); };

    // Indexes pushed after the manifests were read are found in the log from here.
    auto seen = meta.log_head();
    std::vector<Node> nodes;
    std::unordered_map<std::uint64_t, std::size_t> by_fp;
    meta.visit_manifests(sweep.repo, [&](const std::string& digest, const storage::ManifestRecord& record) {
        Node node;
        node.fp = fingerprint(digest);
        node.stamp = record.stamp;
        if (!record.subject.empty()) node.subject = fingerprint(record.subject);
        node.children = children_of(record);
        node.kept = tagged(node.fp) || storage::HybridClock::physical_ms(record.stamp.clock) > sweep.cutoff_ms;
        if (!node.kept) node.digest = digest;
        by_fp.emplace(node.fp, nodes.size());
        nodes.push_back(std::move(node));
    });

    // Referrers by subject, to keep those of what is kept.
    std::unordered_multimap<std::uint64_t, std::size_t> referrers;
    for (std::size_t i = 0; i < nodes.size(); ++i)
        if (nodes[i].subject) referrers.emplace(nodes[i].subject, i);
    // What hangs off a node: its children, and its referrers.
    auto each_dependent = [&](const Node& node, auto visit) {
        for (auto child : node.children)
            if (auto it = by_fp.find(child); it != by_fp.end()) visit(it->second);
        auto [first, last] = referrers.equal_range(node.fp);
        for (auto it = first; it != last; ++it) visit(it->second);
    };

    // Keeps what hangs off the nodes in work, and what hangs off that.
    auto keep_dependents = [&](std::vector<std::size_t> work) {
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
    };
    std::vector<std::size_t> kept;
    for (std::size_t i = 0; i < nodes.size(); ++i)
        if (nodes[i].kept) kept.push_back(i);
    keep_dependents(std::move(kept));

    // Parents first: a node is ready once none of its parents is left.
    for (auto& node : nodes)
        if (!node.kept) each_dependent(node, [&](std::size_t d) { ++nodes[d].parents; });
    std::vector<std::size_t> ready;
    for (std::size_t i = 0; i < nodes.size(); ++i)
        if (!nodes[i].kept && nodes[i].parents == 0) ready.push_back(i);

    std::size_t count = 0;
    while (!ready.empty()) {
        std::vector<std::size_t> went, next;
        for (std::size_t start = 0; start < ready.size(); start += chunk) {
            const auto end = std::min(ready.size(), start + chunk);
            if (sweep.dry_run) {
                went.insert(went.end(), ready.begin() + start, ready.begin() + end);
                continue;
            }
            std::vector<std::size_t> committed;
            auto lock = meta.lock_writes();
            // An index pushed (or replicated) here since the manifests were
            // read keeps what it lists: it checked them under this lock.
            for (std::vector<storage::LogEntry> page; !(page = meta.read_log(seen, 1000)).empty();)
                for (auto& entry : page) {
                    seen = entry.sequence;
                    auto event = storage::Event::parse(entry.event);
                    if (!event || event->type != storage::Event::Type::manifest || event->repo != sweep.repo) continue;
                    auto record = meta.manifest(sweep.repo, event->digest);
                    if (!record || record->deleted) continue;
                    std::vector<std::size_t> listed;
                    for (auto child : children_of(*record))
                        if (auto it = by_fp.find(child); it != by_fp.end() && !nodes[it->second].kept) {
                            nodes[it->second].kept = true;
                            listed.push_back(it->second);
                        }
                    keep_dependents(std::move(listed));
                }
            storage::MetaStore::Batch batch;
            const storage::Stamp stamp{clock.now(), replica_id};
            for (auto n = start; n < end; ++n) {
                auto& node = nodes[ready[n]];
                if (node.kept) continue;
                auto current = meta.manifest(sweep.repo, node.digest);
                if (!current || current->deleted || current->stamp != node.stamp) continue;  // changed since
                batch.tombstone_manifest(sweep.repo, node.digest, &*current, stamp);
                committed.push_back(ready[n]);
            }
            if (committed.empty()) continue;
            meta.commit(batch, storage::MetaStore::Durability::deferred);
            lock.unlock();
            meta.sync();
            went.insert(went.end(), committed.begin(), committed.end());
        }
        for (auto i : went) {
            gone(nodes[i].digest);
            ++count;
            each_dependent(nodes[i], [&](std::size_t d) {
                if (!nodes[d].kept && --nodes[d].parents == 0) next.push_back(d);
            });
        }
        ready = std::move(next);
    }
    return count;
}

}  // namespace berth::registry
