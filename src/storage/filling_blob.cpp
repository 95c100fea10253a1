#include "berth/storage/filling_blob.hpp"

namespace berth::storage {

FillingBlob::FillingBlob(OpenBlob blob) : blob_(std::move(blob)) {}

OpenBlob FillingBlob::reader() { return blob_.another(shared_from_this()); }

std::uint64_t FillingBlob::can_read_locked() const {
    if (verified_) return blob_.size();
    const auto held_back = blob_.size() ? blob_.size() - 1 : 0;
    return written_ < held_back ? written_ : held_back;
}

std::uint64_t FillingBlob::readable() const {
    std::lock_guard lock(mutex_);
    return failed_ ? 0 : can_read_locked();
}

bool FillingBlob::failed() const {
    std::lock_guard lock(mutex_);
    return failed_;
}

void FillingBlob::when_readable(std::uint64_t offset, std::function<void()> more) {
    {
        std::lock_guard lock(mutex_);
        if (!failed_ && can_read_locked() <= offset) {
            waiters_.emplace_back(offset, std::move(more));
            return;
        }
    }
    more();
}

std::vector<std::function<void()>> FillingBlob::take_waiters_locked() {
    const auto can_read = can_read_locked();
    std::vector<std::function<void()>> due;
    std::erase_if(waiters_, [&](auto& waiter) {
        if (!failed_ && waiter.first >= can_read) return false;
        due.push_back(std::move(waiter.second));
        return true;
    });
    return due;
}

void FillingBlob::wrote(std::uint64_t total) {
    change([&] { written_ = total; });
}

void FillingBlob::verified() {
    change([&] { verified_ = true; });
}

void FillingBlob::fail() {
    change([&] { failed_ = true; });
}

void FillingBlob::change(const std::function<void()>& update) {
    std::vector<std::function<void()>> due;
    {
        std::lock_guard lock(mutex_);
        update();
        due = take_waiters_locked();
    }
    for (auto& more : due) more();  // outside the lock: a reader may ask again at once
}

}  // namespace berth::storage
