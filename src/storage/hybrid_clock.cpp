#include "berth/storage/hybrid_clock.hpp"

#include <chrono>

namespace berth::storage {

HybridClock::HybridClock(WallClock wall) : wall_(std::move(wall)) {}

std::uint64_t HybridClock::now() {
    std::lock_guard lock(mutex_);
    const std::uint64_t physical = wall_() << 16;
    last_ = physical > last_ ? physical : last_ + 1;
    return last_;
}

void HybridClock::observe(std::uint64_t remote) {
    std::lock_guard lock(mutex_);
    if (remote > last_) last_ = remote;
}

HybridClock::WallClock system_wall_clock() {
    return [] {
        using namespace std::chrono;
        return static_cast<std::uint64_t>(duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count());
    };
}

}  // namespace berth::storage
