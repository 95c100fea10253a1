#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "berth/node/scheduler.hpp"
#include "berth/observe/metrics.hpp"

using namespace std::chrono_literals;

namespace {

// Polls for a condition the scheduler must bring about; fails after a generous limit.
template <typename F>
bool eventually(F&& condition) {
    for (int i = 0; i < 500; ++i) {
        if (condition()) return true;
        std::this_thread::sleep_for(10ms);
    }
    return condition();
}

}  // namespace

TEST_CASE("periodic jobs run, survive what they throw, are counted, and stop") {
    berth::observe::MetricsRegistry metrics;
    std::atomic<int> ticks{0}, throws{0};
    {
        berth::node::Scheduler scheduler(metrics);
        scheduler.every("tick", 20ms, [&] { ++ticks; });
        scheduler.every("throws", 20ms, [&] {
            ++throws;
            if (throws % 2) throw std::runtime_error("odd run");
            throw 42;  // not even a std::exception
        });
        CHECK(ticks == 0);  // nothing before start()
        scheduler.start();
        CHECK_THROWS_AS(scheduler.every("late", 1s, [] {}), std::logic_error);
        CHECK(eventually([&] { return ticks >= 3 && throws >= 3; }));
        auto text = metrics.text();
        CHECK(text.find("berth_periodic_task_failures_total{task=\"throws\"} ") != std::string::npos);
        CHECK(text.find("berth_periodic_task_runs_total{task=\"tick\"} ") != std::string::npos);
        CHECK(text.find("berth_periodic_task_duration_seconds_count{task=\"tick\"} ") != std::string::npos);
        CHECK(text.find("berth_periodic_task_failures_total{task=\"tick\"} 0\n") != std::string::npos);
        scheduler.stop();
        const int stopped_at = ticks;
        std::this_thread::sleep_for(100ms);  // five periods: none may run after stop()
        CHECK(ticks == stopped_at);
    }
}

TEST_CASE("a job never overlaps itself, and a long one holds up no other") {
    berth::observe::MetricsRegistry metrics;
    berth::node::Scheduler scheduler(metrics);
    std::atomic<int> running{0}, most{0}, slow_runs{0}, fast_runs{0};
    std::atomic<bool> release{false};
    scheduler.every("slow", 10ms, [&] {
        most = std::max(most.load(), ++running);
        ++slow_runs;
        while (!release) std::this_thread::sleep_for(1ms);
        --running;
    });
    scheduler.every("fast", 10ms, [&] { ++fast_runs; });
    scheduler.start();
    CHECK(eventually([&] { return slow_runs == 1 && fast_runs >= 5; }));
    CHECK(slow_runs == 1);  // still in its first run: not started again beside it
    release = true;
    CHECK(eventually([&] { return slow_runs >= 3; }));
    scheduler.stop();
    CHECK(most == 1);
}
