#pragma once
// Every periodic job of the process runs here: garbage collection, scrub,
// retention, log compaction, cache trimming, the TLS reload. Each job runs on
// a thread of its own pool, never on one that serves requests, never
// overlapping itself, every period give or take a tenth (so replicas started
// together do not scan their disks in step). Whatever a job throws is logged
// and counted (berth_periodic_task_*); stop() starts no more runs and waits
// for those under way.
#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace berth::observe {
class MetricsRegistry;
}

namespace berth::node {

class Scheduler {
public:
    explicit Scheduler(observe::MetricsRegistry& metrics);
    ~Scheduler();  // stop()
    Scheduler(const Scheduler&) = delete;
    Scheduler& operator=(const Scheduler&) = delete;

    // Before start(): runs job about every period, the first time about one period after start().
    void every(std::string name, std::chrono::milliseconds period, std::function<void()> job);
    void start();
    void stop();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace berth::node
