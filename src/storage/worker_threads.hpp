#pragma once
// A plain pool of threads for an upload's pipeline: hashing on one pool,
// writing to disk on another, so an upload's next piece is received while the
// previous ones are stored and hashed. Their tasks never wait for other tasks
// (at most for the disk), so a thread may wait for one without risk of
// deadlock: the request workers may all be waiting on fsyncs or peers.
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace berth::storage {

class WorkerThreads {
public:
    explicit WorkerThreads(unsigned threads);
    ~WorkerThreads();  // runs what is queued, then joins
    WorkerThreads(const WorkerThreads&) = delete;
    WorkerThreads& operator=(const WorkerThreads&) = delete;

    void post(std::function<void()> task);
    // Waits until nothing is queued or running (what is queued runs first).
    void drain();

private:
    void run();

    std::mutex mutex_;
    std::condition_variable wake_;
    std::condition_variable idle_;
    unsigned running_ = 0;
    std::deque<std::function<void()>> tasks_;
    bool stopping_ = false;
    std::vector<std::thread> threads_;
};

}  // namespace berth::storage
