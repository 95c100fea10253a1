#include "berth/node/scheduler.hpp"

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <list>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <thread>

#include "berth/observe/log.hpp"
#include "berth/observe/metrics.hpp"

namespace berth::node {

namespace asio = boost::asio;

struct Job {
    Job(asio::io_context& io, std::string name, std::chrono::milliseconds period, std::function<void()> run)
        : name(std::move(name)), period(period), run(std::move(run)), timer(io) {}
    std::string name;
    std::chrono::milliseconds period;
    std::function<void()> run;
    asio::steady_timer timer;
    std::atomic<std::uint64_t> runs{0}, failures{0}, micros{0};
};

struct Scheduler::Impl {
    asio::io_context io;  // the timers, on one thread
    std::optional<asio::executor_work_guard<asio::io_context::executor_type>> keep_running{io.get_executor()};
    std::optional<asio::thread_pool> pool;  // the jobs, a thread each at most
    std::thread timers;
    std::list<Job> jobs;  // a list: timers and handlers hold references to its elements
    std::mutex mutex;
    bool started = false, stopping = false;
    std::minstd_rand random{std::random_device{}()};

    void arm(Job& job) {
        std::uniform_real_distribution<double> jitter(0.9, 1.1);
        const auto next = std::chrono::duration_cast<std::chrono::milliseconds>(job.period * jitter(random));
        job.timer.expires_after(next);
        job.timer.async_wait([this, &job](boost::system::error_code ec) {
            if (ec || stopping) return;
            asio::post(*pool, [this, &job] {
                run(job);
                asio::post(io, [this, &job] {
                    if (!stopping) arm(job);
                });
            });
        });
    }

    static void run(Job& job) {
        const auto started = std::chrono::steady_clock::now();
        ++job.runs;
        try {
            job.run();
        } catch (const std::exception& error) {
            ++job.failures;
            observe::log("error", "periodic task failed", {{"task", job.name}, {"error", error.what()}});
        } catch (...) {
            ++job.failures;
            observe::log("error", "periodic task failed", {{"task", job.name}, {"error", "unknown exception"}});
        }
        job.micros += static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started).count());
    }

    void write_metrics(observe::MetricsWriter& out) const {
        using observe::Metric;
        for (auto& job : jobs) {
            const observe::Labels task = {{"task", job.name}};
            out.add(Metric::periodic_task_runs_total, task, static_cast<double>(job.runs.load()));
            out.add(Metric::periodic_task_failures_total, task, static_cast<double>(job.failures.load()));
            out.add_summary(Metric::periodic_task_duration_seconds, task, static_cast<double>(job.micros.load()) / 1e6,
                            job.runs.load());
        }
    }
};

Scheduler::Scheduler(observe::MetricsRegistry& metrics) : impl_(std::make_unique<Impl>()) {
    metrics.add_source([impl = impl_.get()](observe::MetricsWriter& out) { impl->write_metrics(out); });
}

Scheduler::~Scheduler() { stop(); }

void Scheduler::every(std::string name, std::chrono::milliseconds period, std::function<void()> job) {
    std::lock_guard lock(impl_->mutex);
    if (impl_->started) throw std::logic_error("Scheduler::every after start()");
    impl_->jobs.emplace_back(impl_->io, std::move(name), period, std::move(job));
}

void Scheduler::start() {
    std::lock_guard lock(impl_->mutex);
    if (impl_->started) return;
    impl_->started = true;
    impl_->pool.emplace(std::max<std::size_t>(impl_->jobs.size(), 1));
    for (auto& job : impl_->jobs) impl_->arm(job);
    impl_->timers = std::thread([impl = impl_.get()] { impl->io.run(); });
}

void Scheduler::stop() {
    {
        std::lock_guard lock(impl_->mutex);
        if (!impl_->started || impl_->stopping) return;
    }
    asio::post(impl_->io, [impl = impl_.get()] {
        impl->stopping = true;
        for (auto& job : impl->jobs) job.timer.cancel();
    });
    impl_->keep_running.reset();
    impl_->timers.join();  // no timer armed any more: nothing new starts
    impl_->pool->join();   // the runs under way finish
    std::lock_guard lock(impl_->mutex);
    impl_->stopping = true;
}

}  // namespace berth::node
