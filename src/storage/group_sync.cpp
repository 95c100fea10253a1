#include "group_sync.hpp"

#include <algorithm>
#include <exception>
#include <stdexcept>

namespace berth::storage {

GroupSync::GroupSync(std::function<std::uint64_t()> latest, std::function<std::string()> sync_log)
    : latest_(std::move(latest)), sync_log_(std::move(sync_log)), synced_(latest_()) {}

void GroupSync::sync() {
    const auto wanted = latest_();
    std::unique_lock lock(mutex_);
    for (;;) {
        if (!failed_.empty()) throw std::runtime_error(failed_);
        if (synced_ >= wanted) return;
        if (syncing_) {
            done_.wait(lock);
            continue;
        }
        syncing_ = true;
        const auto covered = latest_();
        lock.unlock();
        std::string error;
        try {
            error = sync_log_();
        } catch (const std::exception& e) {
            error = e.what();
        }
        lock.lock();
        ++syncs_;
        syncing_ = false;
        if (error.empty()) synced_ = std::max(synced_, covered);
        else
            failed_ =
                "sync metadata: an fsync of the log failed, so what it held may be lost (" + error + "); restart berth";
        done_.notify_all();
    }
}

std::uint64_t GroupSync::syncs() const {
    std::lock_guard lock(mutex_);
    return syncs_;
}

}  // namespace berth::storage
