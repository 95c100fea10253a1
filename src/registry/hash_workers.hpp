#pragma once
// Threads that only hash upload bodies, so an upload's next piece is received
// and written while the previous one is hashed. Their tasks never block, so a
// thread may wait for one without risk of deadlock (the request workers may
// all be waiting on fsyncs or peers; these never are).
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace berth::registry {

class HashWorkers {
public:
    explicit HashWorkers(unsigned threads);
    ~HashWorkers();  // runs what is queued, then joins
    HashWorkers(const HashWorkers&) = delete;
    HashWorkers& operator=(const HashWorkers&) = delete;

    void post(std::function<void()> task);

private:
    void run();

    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::function<void()>> tasks_;
    bool stopping_ = false;
    std::vector<std::thread> threads_;
};

}  // namespace berth::registry
