#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <system_error>
#include <vector>

#include "berth/oci/error.hpp"
#include "berth/registry/upload.hpp"
#include "upload_table.hpp"

namespace berth::registry {

// A few buffers go round: the I/O thread receives into one and writes it to
// the file, a hash worker hashes the ones queued behind it, in order.
struct UploadAppender::Pipeline {
    static constexpr std::size_t buffer_bytes = 256 * 1024;
    // Three let receiving, writing and hashing overlap; more only cost memory.
    static constexpr std::size_t buffer_count = 3;
    static constexpr std::uint64_t inline_limit = 1 << 20;

    std::mutex mutex;
    std::condition_variable changed;
    std::unique_ptr<char[]> current;  // handed out by buffer(), not yet committed
    std::vector<std::unique_ptr<char[]>> free;
    std::size_t allocated = 0;
    std::deque<std::pair<std::unique_ptr<char[]>, std::size_t>> queued;
    bool hashing = false;  // a hash worker is draining `queued`
    std::function<void()> resume;

    void drain(oci::Hasher& hasher) {
        std::unique_lock lock(mutex);
        while (!queued.empty()) {
            auto [bytes, size] = std::move(queued.front());
            queued.pop_front();
            lock.unlock();
            hasher.update(bytes.get(), size);
            lock.lock();
            free.push_back(std::move(bytes));
            changed.notify_all();
            if (auto wake = std::exchange(resume, nullptr)) {
                lock.unlock();
                wake();
                lock.lock();
            }
        }
        hashing = false;
        changed.notify_all();
    }
};

UploadAppender::UploadAppender(std::shared_ptr<UploadState> state, UploadTable& table, std::uint64_t max_bytes)
    : state_(std::move(state)), table_(table), max_bytes_(max_bytes) {}

UploadAppender::~UploadAppender() {
    std::function<void()> dropped;  // may hold the last reference to a session: destroyed unlocked
    if (pipeline_) {
        std::unique_lock lock(pipeline_->mutex);
        dropped = std::exchange(pipeline_->resume, nullptr);
        pipeline_->changed.wait(lock, [&] { return !pipeline_->hashing; });
    }
    table_.release(state_);
}

std::uint64_t UploadAppender::offset() const { return state_->offset; }

std::span<char> UploadAppender::buffer(std::function<void()> resume) {
    if (!pipeline_) pipeline_ = std::make_shared<Pipeline>();
    auto& p = *pipeline_;
    std::lock_guard lock(p.mutex);
    if (!p.current) {
        if (!p.free.empty()) {
            p.current = std::move(p.free.back());
            p.free.pop_back();
        } else if (p.allocated < Pipeline::buffer_count) {
            p.current = std::make_unique_for_overwrite<char[]>(Pipeline::buffer_bytes);
            ++p.allocated;
        } else {
            p.resume = std::move(resume);
            return {};
        }
    }
    return {p.current.get(), Pipeline::buffer_bytes};
}

void UploadAppender::commit(std::size_t size) {
    if (size == 0) return;
    if (max_bytes_ && state_->offset + size > max_bytes_)
        throw oci::Error(oci::ErrorCode::size_invalid, "blob exceeds the maximum size of an upload");
    table_.require_space(size);
    auto& p = *pipeline_;
    const char* bytes = p.current.get();  // only this thread touches `current`
    std::size_t done = 0;
    while (done < size) {
        auto n = ::pwrite(state_->fd, bytes + done, size - done, static_cast<off_t>(state_->offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int saved = errno;
            // Keep file and hash state in step: drop the part of this write that landed.
            if (::ftruncate(state_->fd, static_cast<off_t>(state_->offset)) != 0) {}
            throw std::system_error(saved, std::generic_category(), "write upload file");
        }
        done += static_cast<std::size_t>(n);
    }
    // Start writing back each finished 8 MiB now, so the fsync at commit
    // waits for little more than the tail instead of the whole blob.
    constexpr std::uint64_t writeback = 8 << 20;
    const auto before = state_->offset / writeback, after = (state_->offset + size) / writeback;
    if (after > before)
        ::sync_file_range(state_->fd, static_cast<off_t>(before * writeback),
                          static_cast<off_t>((after - before) * writeback), SYNC_FILE_RANGE_WRITE);
    state_->offset += size;

    bool start;
    {
        std::lock_guard lock(p.mutex);
        // The start of a body is hashed right here: for a small blob, handing
        // it to another thread costs more than the overlap gains.
        if (inline_bytes_ < Pipeline::inline_limit && !p.hashing) {
            inline_bytes_ += size;
            state_->hasher->update(p.current.get(), size);
            return;  // `current` stays ours for the next piece
        }
        p.queued.emplace_back(std::move(p.current), size);
        start = !std::exchange(p.hashing, true);
    }
    if (start)
        table_.hash_workers().post([pipeline = pipeline_, state = state_] { pipeline->drain(*state->hasher); });
}

void UploadAppender::write(const void* data, std::size_t size) {
    auto* bytes = static_cast<const char*>(data);
    while (size > 0) {
        auto room = buffer(nullptr);
        if (room.empty()) {
            std::unique_lock lock(pipeline_->mutex);
            pipeline_->changed.wait(lock, [&] { return !pipeline_->free.empty(); });
            continue;
        }
        const auto n = std::min(size, room.size());
        std::memcpy(room.data(), bytes, n);
        commit(n);
        bytes += n;
        size -= n;
    }
}

}  // namespace berth::registry
