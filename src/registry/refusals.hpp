#pragma once
// Policy refusals by policy and reason, for berth_policy_refusals_total.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "berth/registry/registry.hpp"

namespace berth::registry {

struct Registry::Refusals {
    std::mutex mutex;
    std::map<std::pair<std::string, std::string>, std::uint64_t> counts;  // (policy, reason)

    void count(const std::string& policy, const std::string& reason) {
        std::lock_guard lock(mutex);
        ++counts[{policy, reason}];
    }
};

}  // namespace berth::registry
