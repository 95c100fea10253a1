#include "party_pools.hpp"

namespace berth::http {

PartyPool::PartyPool(unsigned threads, std::size_t max_queued) : max_queued_(max_queued) {
    for (unsigned i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
}

PartyPool::~PartyPool() {
    decltype(queue_) dropped;
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
        dropped.swap(queue_);
    }
    ready_.notify_all();
    for (auto& thread : threads_) thread.join();
}

bool PartyPool::post(Task task) {
    {
        std::lock_guard lock(mutex_);
        if (queue_.size() >= max_queued_) return false;
        queue_.emplace_back(Clock::now(), std::move(task));
    }
    ready_.notify_one();
    return true;
}

void PartyPool::work() {
    for (;;) {
        std::pair<Clock::time_point, Task> next;
        {
            std::unique_lock lock(mutex_);
            ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
            if (queue_.empty()) return;
            next = std::move(queue_.front());
            queue_.pop_front();
        }
        next.second(Clock::now() - next.first);
    }
}

void PartyPools::stop() {
    std::map<std::string, std::unique_ptr<PartyPool>> pools;
    {
        std::lock_guard lock(mutex_);
        pools.swap(pools_);
        stopped_ = true;
    }
}

bool PartyPools::post(const std::string& party, PartyPool::Task task) {
    std::lock_guard lock(mutex_);
    if (stopped_) return false;
    auto& pool = pools_[party];
    if (!pool) pool = std::make_unique<PartyPool>(threads_, max_queued_);
    return pool->post(std::move(task));
}

}  // namespace berth::http
