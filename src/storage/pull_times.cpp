#include "berth/storage/pull_times.hpp"

#include <algorithm>

#include "berth/storage/meta_store.hpp"

namespace berth::storage {

namespace {

std::string key_of(const std::string& repo, const std::string& name) {
    std::string key;
    key.reserve(repo.size() + 1 + name.size());
    key += repo;
    key += '\0';
    key += name;
    return key;
}

}  // namespace

PullTimes::PullTimes(MetaStore& meta) : meta_(meta) {}

void PullTimes::pulled(const std::string& repo, const std::string& name, std::uint64_t now_ms) {
    const auto rounded = (now_ms + resolution_ms - 1) / resolution_ms * resolution_ms;
    bool full;
    {
        std::lock_guard lock(mutex_);
        for (auto* what : {&name, &whole_repository}) {
            auto& noted = noted_[key_of(repo, *what)];
            noted = std::max(noted, rounded);
        }
        full = noted_.size() >= max_noted;
    }
    if (full) flush();
}

void PullTimes::flush() {
    std::lock_guard one_at_a_time(flush_mutex_);
    {
        std::lock_guard lock(mutex_);
        flushing_.swap(noted_);
    }
    try {
        std::vector<MetaStore::Pull> writes;
        for (auto& [key, ms] : flushing_) {
            const auto nul = key.find('\0');
            MetaStore::Pull pull{key.substr(0, nul), key.substr(nul + 1), ms};
            // The same hour as written already: nothing to write.
            if (auto stored = meta_.pull_time(pull.repo, pull.name); stored && *stored >= ms) continue;
            writes.push_back(std::move(pull));
        }
        meta_.put_pulls(writes);
    } catch (...) {
        std::lock_guard lock(mutex_);
        for (auto& [key, ms] : flushing_) noted_[key] = std::max(noted_[key], ms);
        flushing_.clear();
        throw;
    }
    std::lock_guard lock(mutex_);
    flushing_.clear();
}

std::optional<std::uint64_t> PullTimes::last(const std::string& repo, const std::string& name) const {
    auto found = meta_.pull_time(repo, name);
    std::lock_guard lock(mutex_);
    for (auto* noted : {&noted_, &flushing_})
        if (auto it = noted->find(key_of(repo, name)); it != noted->end())
            found = std::max(found.value_or(0), it->second);
    return found;
}

std::vector<std::pair<std::string, std::uint64_t>> PullTimes::since(const std::string& repo, std::uint64_t since_ms,
                                                                    const std::string& after, std::size_t limit) const {
    std::map<std::string, std::uint64_t> found;
    if (limit == 0) return {};
    meta_.visit_pulls(repo, after, [&](const std::string& name, std::uint64_t ms) {
        if (ms >= since_ms && name != whole_repository) found.emplace(name, ms);
        return found.size() < limit;
    });
    // Noted names join those read; past the last one read the disk may hold
    // others, so the answer is cut at `limit` names, which are then complete.
    {
        std::lock_guard lock(mutex_);
        const auto prefix = key_of(repo, "");
        for (auto* noted : {&noted_, &flushing_})
            for (auto it = noted->upper_bound(prefix + after); it != noted->end() && it->first.starts_with(prefix);
                 ++it)
                if (it->second >= since_ms && it->first.size() > prefix.size()) {
                    auto& ms = found[it->first.substr(prefix.size())];
                    ms = std::max(ms, it->second);
                }
    }
    std::vector<std::pair<std::string, std::uint64_t>> out(found.begin(), found.end());
    if (out.size() > limit) out.resize(limit);
    return out;
}

}  // namespace berth::storage
