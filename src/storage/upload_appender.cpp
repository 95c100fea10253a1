#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

#include "berth/oci/error.hpp"
#include "berth/observe/log.hpp"
#include "berth/storage/upload_appender.hpp"
#include "upload_buffers.hpp"
#include "worker_threads.hpp"

namespace berth::storage {

namespace {

// O_DIRECT wants buffer, file offset and length aligned to the disk's logical
// block; a page covers every common one (and the buffers are whole pages).
constexpr std::size_t alignment = 4096;

using Buffer = UploadBuffers::Buffer;

bool set_direct(int fd, bool on) {
    const int flags = ::fcntl(fd, F_GETFL);
    return flags >= 0 && ::fcntl(fd, F_SETFL, on ? flags | O_DIRECT : flags & ~O_DIRECT) == 0;
}

// 0 or the errno of the failed write.
int write_at(int fd, std::vector<iovec> iov, std::uint64_t offset) {
    std::size_t first = 0;
    while (first < iov.size()) {
        auto n = ::pwritev(fd, iov.data() + first, static_cast<int>(iov.size() - first), static_cast<off_t>(offset));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return errno;
        offset += static_cast<std::uint64_t>(n);
        for (auto left = static_cast<std::size_t>(n); left;) {
            const auto step = std::min(left, iov[first].iov_len);
            iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + step;
            iov[first].iov_len -= step;
            left -= step;
            if (iov[first].iov_len == 0) ++first;
        }
    }
    return 0;
}

}  // namespace

struct UploadWriters::Impl {
    // Bytes of receive buffers held by all appenders together: the depth a
    // lone upload's pipeline may grow to depends on it.
    std::atomic<std::size_t> buffer_bytes{0};
    // Before the workers: their tasks may hold the last of a pipeline's buffers.
    // 1 MiB pieces: a quarter of the reads, writes and hand-offs per GiB of 256 KiB
    // ones (bench/RESULTS.md, "CPU floor"). An upload that starts while all hold
    // 32 MiB gets 256 KiB ones: what a stalled upload holds stays as it was, and
    // 1,000 of them (registry.max_uploads) hold about 280 MiB, not a GiB.
    UploadBuffers large{1 << 20, 16 << 20};
    UploadBuffers small{256 << 10, 4 << 20};
    // Writers before hashers: a hash worker may hand a finished request to a writer, so the
    // writers go last.
    WorkerThreads write_workers{
        std::max(4u, 2 * std::thread::hardware_concurrency())};                     // a write may wait for the disk
    WorkerThreads hash_workers{std::max(1u, std::thread::hardware_concurrency())};  // hashing is all CPU
};

UploadWriters::UploadWriters() : impl_(std::make_unique<Impl>()) {}
UploadWriters::~UploadWriters() = default;
std::size_t UploadWriters::buffer_bytes() const { return impl_->buffer_bytes.load(); }

void UploadWriters::drain() {
    impl_->hash_workers.drain();  // first: a hash worker may hand what it finished to a writer
    impl_->write_workers.drain();
}

struct UploadAppender::Pipeline {
    // Three let receiving, writing and hashing overlap. A lone upload may go
    // deeper: the writer then takes several buffers per write and the I/O
    // thread seldom waits for a free one. Many uploads keep the disk and the
    // cores busy together, so once they hold 16 MiB in all none grows past
    // three, and once they hold 32 MiB none takes more than its first: 32
    // concurrent pushes stay within 64 MiB of buffers. Past it new uploads
    // also take smaller buffers (UploadWriters::Impl).
    static constexpr std::size_t buffer_count = 3;
    static constexpr std::size_t deep_buffer_count = 8;
    static constexpr std::size_t deep_while_all_below = 16 << 20;     // bytes, over all uploads
    static constexpr std::size_t overlap_while_all_below = 32 << 20;  // bytes, over all uploads
    static constexpr std::uint64_t inline_limit = 1 << 20;

    // A full buffer on its way to the file and through the hash.
    struct Piece {
        Buffer bytes;
        std::uint64_t file_offset;  // of bytes[0]
        std::size_t size;
        std::size_t hash_from;  // what comes before was hashed already
        int stages;             // writing and hashing still to do
    };
    using PiecePtr = std::shared_ptr<Piece>;

    UploadBuffers* pool = nullptr;  // where this upload's buffers come from
    std::size_t buffer_bytes = 0;   // theirs

    // Filled by the appending thread only.
    Buffer current;
    std::uint64_t current_offset = 0;  // file offset of current[0], aligned
    std::size_t filled = 0;
    std::size_t hashed = 0;  // current[0, hashed) is in the digest state
    std::size_t stored = 0;  // current[0, stored) is in the file

    std::mutex mutex;
    std::condition_variable changed;
    std::vector<Buffer> free;
    std::size_t allocated = 0;
    std::deque<PiecePtr> to_write, to_hash;
    bool writing = false, hashing = false;
    int write_error = 0;
    std::uint64_t written = 0;  // the file is right up to here
    bool recovered = false;
    bool direct = false;  // the fd has O_DIRECT; dropped by a writer if the file system refuses it
    std::function<void()> resume;
    std::function<void()> on_stored;  // see when_stored()
    std::function<void()> make_file;  // UploadPolicy's

    // 0, or the errno of a file that could not be made. By a writer (whole
    // pieces: O_DIRECT), or by finish() once no writer runs (the tail goes
    // through the page cache): never two at once.
    int ensure_file(UploadFile& file, bool for_pieces) {
        if (file.fd >= 0) return 0;
        try {
            make_file();
        } catch (const std::system_error& error) {
            return error.code().value() ? error.code().value() : EIO;
        } catch (const std::exception&) {
            return EIO;
        }
        direct = for_pieces && set_direct(file.fd, true);
        return 0;
    }

    // Counts a new buffer against this pipeline and `all_bytes`, if it may have one.
    bool may_allocate(std::atomic<std::size_t>& all_bytes) {
        const auto all = all_bytes.load(std::memory_order_relaxed);
        if (allocated >= deep_buffer_count) return false;
        if (allocated >= buffer_count && all >= deep_while_all_below) return false;
        if (allocated >= 1 && all >= overlap_while_all_below) return false;
        ++allocated;
        all_bytes += buffer_bytes;
        return true;
    }

    // With the lock held, once neither a write nor a hash is in flight;
    // gives the lock up for good when it runs on_stored. From a hash worker
    // it goes to a writer: what finishes a request may wait for the disk,
    // and hash workers (one per core) are for hashing alone.
    void run_if_stored(std::unique_lock<std::mutex>& lock, WorkerThreads* hand_to = nullptr) {
        if (writing || hashing || !on_stored) return;
        auto ready = std::exchange(on_stored, nullptr);
        lock.unlock();
        if (hand_to) hand_to->post(std::move(ready));
        else ready();
    }

    // With the lock held; gives the lock up to wake a waiting reader.
    void stage_done(Piece& piece, std::unique_lock<std::mutex>& lock) {
        if (--piece.stages) return;
        free.push_back(std::move(piece.bytes));
        changed.notify_all();
        if (auto wake = std::exchange(resume, nullptr)) {
            lock.unlock();
            wake();
            lock.lock();
        }
    }

    // Queued pieces are consecutive, so whatever is queued goes in one write.
    void drain_writes(UploadFile& file) {
        std::unique_lock lock(mutex);
        while (!to_write.empty()) {
            std::vector<PiecePtr> batch(to_write.begin(), to_write.end());
            to_write.clear();
            const bool skip = write_error != 0;
            lock.unlock();
            int error = 0;
            if (!skip) error = ensure_file(file, true);
            if (!skip && !error) {
                std::vector<iovec> iov;
                for (auto& piece : batch) iov.push_back({piece->bytes.get(), piece->size});
                error = write_at(file.fd, iov, batch.front()->file_offset);
                // A file system may refuse O_DIRECT for this file after all: write through the cache.
                if (error == EINVAL && direct && set_direct(file.fd, false)) {
                    direct = false;
                    error = write_at(file.fd, iov, batch.front()->file_offset);
                }
            }
            lock.lock();
            if (error) write_error = error;
            else if (!skip) written = batch.back()->file_offset + batch.back()->size;
            for (auto& piece : batch) stage_done(*piece, lock);
        }
        writing = false;
        changed.notify_all();
        run_if_stored(lock);
    }

    void drain_hashes(oci::Hasher& hasher, WorkerThreads& write_workers) {
        std::unique_lock lock(mutex);
        while (!to_hash.empty()) {
            auto piece = std::move(to_hash.front());
            to_hash.pop_front();
            lock.unlock();
            hasher.update(piece->bytes.get() + piece->hash_from, piece->size - piece->hash_from);
            lock.lock();
            stage_done(*piece, lock);
        }
        hashing = false;
        changed.notify_all();
        run_if_stored(lock, &write_workers);
    }
};

UploadAppender::UploadAppender(std::shared_ptr<UploadFile> file, UploadWriters& writers, UploadPolicy policy)
    : state_(std::move(file)), writers_(writers), policy_(std::move(policy)) {
    try {
        start();
    } catch (...) {
        policy_.release();
        throw;
    }
}

UploadAppender::~UploadAppender() {
    try {
        finish();
    } catch (const std::exception& error) {
        observe::log("warn", "upload write failed", {{"upload", state_->id}, {"error", error.what()}});
    }
    std::function<void()> dropped, unstored;  // may hold the last reference to a session: destroyed unlocked
    {
        std::lock_guard lock(pipeline_->mutex);
        dropped = std::exchange(pipeline_->resume, nullptr);
        unstored = std::exchange(pipeline_->on_stored, nullptr);
    }
    // No worker touches the buffers any more; they go with the pipeline's last reference.
    writers_.impl_->buffer_bytes -= pipeline_->allocated * pipeline_->buffer_bytes;
    policy_.release();
}

std::uint64_t UploadAppender::offset() const { return state_->offset; }

// The first buffer starts at the aligned offset at or before the session's
// end, holding the bytes in front of it read back from the file, so every
// full buffer can be written with O_DIRECT. That read is under 4 KiB, of the
// tail the last append wrote through the page cache: done here, where the
// session is taken up (an I/O thread, for a session whose file exists).
void UploadAppender::start() {
    pipeline_ = std::make_shared<Pipeline>();
    auto& p = *pipeline_;
    p.current_offset = state_->offset / alignment * alignment;
    p.written = state_->offset;
    auto& writers = *writers_.impl_;
    p.pool = writers.buffer_bytes.load() < Pipeline::overlap_while_all_below ? &writers.large : &writers.small;
    p.buffer_bytes = p.pool->buffer_bytes();
    p.current = p.pool->take();
    p.may_allocate(writers.buffer_bytes);  // the first is always allowed
    const auto head = static_cast<std::size_t>(state_->offset - p.current_offset);
    std::size_t got = 0;
    while (got < head) {
        auto n = ::pread(state_->fd, p.current.get() + got, head - got, static_cast<off_t>(p.current_offset + got));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            p.write_error = n < 0 ? errno : EIO;  // commit() reports it
            break;
        }
        got += static_cast<std::size_t>(n);
    }
    p.filled = p.hashed = p.stored = head;
    p.make_file = policy_.make_file;
    if (state_->fd >= 0) p.direct = set_direct(state_->fd, true);
}

std::span<char> UploadAppender::buffer(std::function<void()> resume) {
    auto& p = *pipeline_;
    if (!p.current) {
        std::lock_guard lock(p.mutex);
        if (!p.free.empty()) {
            p.current = std::move(p.free.back());
            p.free.pop_back();
        } else if (p.may_allocate(writers_.impl_->buffer_bytes)) {
            p.current = p.pool->take();
        } else {
            p.resume = std::move(resume);
            return {};
        }
    }
    return {p.current.get() + p.filled, p.buffer_bytes - p.filled};
}

void UploadAppender::commit(std::size_t size) {
    if (size == 0) return;
    if (policy_.max_bytes && state_->offset + size > policy_.max_bytes)
        throw oci::Error(oci::ErrorCode::size_invalid, "blob exceeds the maximum size of an upload");
    if (policy_.require_space &&
        (unchecked_bytes_ == 0 || unchecked_bytes_ + size >= UploadPolicy::space_check_bytes)) {
        policy_.require_space(unchecked_bytes_ + size);
        unchecked_bytes_ = 0;
    }
    unchecked_bytes_ += size;
    auto& p = *pipeline_;
    bool inline_hash;
    {
        std::lock_guard lock(p.mutex);
        if (p.write_error) throw std::system_error(p.write_error, std::generic_category(), "write upload file");
        // The start of a body is hashed right here: for a small blob, handing
        // it to another thread costs more than the overlap gains.
        inline_hash = inline_bytes_ < Pipeline::inline_limit && !p.hashing;
    }
    p.filled += size;
    if (inline_hash) {
        // From `hashed`: the head of this buffer may have come while a worker was still hashing.
        state_->hasher->update(p.current.get() + p.hashed, p.filled - p.hashed);
        inline_bytes_ += p.filled - p.hashed;
        p.hashed = p.filled;
    }
    state_->offset += size;
    if (p.filled == p.buffer_bytes) submit();
}

void UploadAppender::submit() {
    auto& p = *pipeline_;
    auto piece = std::make_shared<Pipeline::Piece>(
        Pipeline::Piece{std::move(p.current), p.current_offset, p.filled, p.hashed, 1});
    bool start_writing, start_hashing = false;
    {
        std::lock_guard lock(p.mutex);
        p.to_write.push_back(piece);
        start_writing = !std::exchange(p.writing, true);
        if (piece->hash_from < piece->size) {
            ++piece->stages;
            p.to_hash.push_back(piece);
            start_hashing = !std::exchange(p.hashing, true);
        }
    }
    p.current_offset += p.filled;
    p.filled = p.hashed = p.stored = 0;
    if (start_writing)
        writers_.impl_->write_workers.post([pipeline = pipeline_, state = state_] { pipeline->drain_writes(*state); });
    if (start_hashing)
        writers_.impl_->hash_workers.post([pipeline = pipeline_, state = state_, writers = writers_.impl_.get()] {
            pipeline->drain_hashes(*state->hasher, writers->write_workers);
        });
}

bool UploadAppender::when_stored(std::function<void()>& ready) {
    auto& p = *pipeline_;
    std::lock_guard lock(p.mutex);
    if (!p.writing && !p.hashing) return false;
    p.on_stored = std::move(ready);
    return true;
}

void UploadAppender::finish() {
    auto& p = *pipeline_;
    std::unique_lock lock(p.mutex);
    p.changed.wait(lock, [&] { return !p.writing && !p.hashing; });
    // Made even with no bytes: an acknowledged append leaves a file to resume from.
    if (!p.write_error) p.write_error = p.ensure_file(*state_, false);
    if (!p.write_error && p.stored < p.filled) {
        // The tail is seldom aligned: it goes through the page cache.
        const bool buffered = !p.direct || set_direct(state_->fd, false);
        p.direct = false;
        int error = buffered ? 0 : errno;
        if (!error)
            error =
                write_at(state_->fd, {{p.current.get() + p.stored, p.filled - p.stored}}, p.current_offset + p.stored);
        if (error) {
            p.write_error = error;
        } else {
            state_->hasher->update(p.current.get() + p.hashed, p.filled - p.hashed);
            p.hashed = p.stored = p.filled;
            p.written = p.current_offset + p.filled;
        }
    }
    if (!p.write_error || std::exchange(p.recovered, true)) return;
    // Back to what surely reached the file; the digest state is rebuilt from
    // it when the session is next taken up.
    if (::ftruncate(state_->fd, static_cast<off_t>(p.written)) != 0) {}
    state_->offset = p.written;
    state_->hasher.reset();
    throw std::system_error(p.write_error, std::generic_category(), "write upload file");
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

}  // namespace berth::storage
