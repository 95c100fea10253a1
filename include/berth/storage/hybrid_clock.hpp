#pragma once
// Hybrid logical clock: physical milliseconds in the high 48 bits, a counter in
// the low 16. It never goes backwards and moves past every stamp it observes, so
// a replica whose wall clock lags still orders its writes after what it has seen.
#include <cstdint>
#include <functional>
#include <mutex>

namespace berth::storage {

class HybridClock {
public:
    using WallClock = std::function<std::uint64_t()>;  // milliseconds since the epoch

    explicit HybridClock(WallClock wall);
    std::uint64_t now();
    void observe(std::uint64_t remote);

    static std::uint64_t physical_ms(std::uint64_t stamp) { return stamp >> 16; }

private:
    WallClock wall_;
    std::mutex mutex_;
    std::uint64_t last_ = 0;
};

HybridClock::WallClock system_wall_clock();

}  // namespace berth::storage
