#pragma once
// The server under test as /proc shows it (--server-pid): CPU time, resident set size
// (sampled every 20 ms during a run) and its high-water mark.
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace berth::bench {

// User plus system CPU seconds of a process so far (-1 when /proc does not say).
double proc_cpu_seconds(long pid);

// A "<key>: N kB" line of /proc/<pid>/status, in KiB (0 when missing).
std::uint64_t proc_status_kib(long pid, const char* key);

// Samples a process's VmRSS every 20 ms on a thread of its own until finish(); pid 0: nothing.
class Sampler {
public:
    explicit Sampler(long pid);
    // Stops sampling; the largest VmRSS seen, in KiB.
    std::uint64_t finish();

private:
    long pid_;
    std::thread thread_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool stop_ = false;
    std::uint64_t max_rss_ = 0;
};

// What the server used during a run; -1 CPU seconds and 0 KiB without --server-pid.
struct ServerUsage {
    double cpu_s = -1;
    std::uint64_t max_rss_kib = 0, hwm_kib = 0;
};

// Watches the server from construction (right before the clock starts) to finish()
// (right after it stops).
class ServerMonitor {
public:
    explicit ServerMonitor(long pid) : pid_(pid), cpu0_(pid ? proc_cpu_seconds(pid) : -1), sampler_(pid) {}
    ServerUsage finish();

private:
    long pid_;
    double cpu0_;
    Sampler sampler_;
};

}  // namespace berth::bench
