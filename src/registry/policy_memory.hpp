#pragma once
// Policy refusals by policy and reason, for berth_policy_refusals_total, the signed index
// that last let a child manifest be served, and which manifests are attachments (attachments.cpp).
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <string>
#include <utility>

#include "berth/registry/registry.hpp"

namespace berth::registry {

struct Registry::PolicyMemory {
    std::mutex mutex;
    std::map<std::pair<std::string, std::string>, std::uint64_t> counts;  // (policy, reason)

    std::unordered_map<std::string, std::string> parents;  // repo \0 child digest -> index digest
    std::unordered_map<std::string, bool> attachments;     // manifest digest -> what its content is

    void count(const std::string& policy, const std::string& reason) {
        std::lock_guard lock(mutex);
        ++counts[{policy, reason}];
    }
    std::optional<std::string> parent_of(const std::string& key) {
        std::lock_guard lock(mutex);
        auto it = parents.find(key);
        return it == parents.end() ? std::nullopt : std::optional(it->second);
    }
    std::optional<bool> attachment(const std::string& digest) {
        std::lock_guard lock(mutex);
        auto it = attachments.find(digest);
        return it == attachments.end() ? std::nullopt : std::optional(it->second);
    }
    void remember_attachment(const std::string& digest, bool is) {
        std::lock_guard lock(mutex);
        if (attachments.size() >= 100000) attachments.clear();
        attachments[digest] = is;
    }
    void remember_parent(const std::string& key, const std::string& index) {
        std::lock_guard lock(mutex);
        if (parents.size() >= 100000) parents.clear();
        parents[key] = index;
    }
};

}  // namespace berth::registry
