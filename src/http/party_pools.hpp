#pragma once
// Threads that may wait on one outside party (an upstream, the peers), and
// on nothing else: a party that hangs holds its own pool's threads and fills
// its own queue, while local reads, probes and every other party go on. A
// request finds its party's queue full, or waits in it past the deadline, and
// is answered at once instead of waiting without end.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace berth::http {

class PartyPool {
public:
    using Clock = std::chrono::steady_clock;
    // `task` runs with how long it waited in the queue.
    using Task = std::function<void(Clock::duration queued)>;

    PartyPool(unsigned threads, std::size_t max_queued);
    ~PartyPool();  // drops what is still queued, lets running tasks end, joins
    PartyPool(const PartyPool&) = delete;
    PartyPool& operator=(const PartyPool&) = delete;

    // False when max_queued tasks wait already.
    bool post(Task task);

private:
    void work();

    std::size_t max_queued_;
    std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<std::pair<Clock::time_point, Task>> queue_;
    bool stopping_ = false;
    std::vector<std::thread> threads_;
};

class PartyPools {
public:
    PartyPools(unsigned threads_per_party, std::size_t max_queued_per_party)
        : threads_(threads_per_party), max_queued_(max_queued_per_party) {}
    // Queues task on the party's pool, made on first use; false when its
    // queue is full or the pools have stopped. Party names come from the
    // configuration (net/reach.hpp), never from a client, so pools are few.
    bool post(const std::string& party, PartyPool::Task task);
    // Before the I/O contexts go, since tasks post back to them: drops what
    // is queued and waits for what runs.
    void stop();

private:
    unsigned threads_;
    std::size_t max_queued_;
    std::mutex mutex_;
    std::map<std::string, std::unique_ptr<PartyPool>> pools_;
    bool stopped_ = false;
};

}  // namespace berth::http
