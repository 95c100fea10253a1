// A blob larger than a part goes up as a multipart upload: parallel_parts parts in flight, each
// hashed and signed on its own, and completed only once every part is in. A failure aborts it;
// a crash leaves it for abort_abandoned(). Until the completion, the key holds nothing.
#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "berth/s3/blob_store.hpp"
#include "mapped_buffer.hpp"

namespace berth::s3 {

void S3BlobStore::abort_quietly(const std::string& object, const std::string& upload_id) {
    try {
        client_.abort_multipart(object, upload_id);
    } catch (const std::exception&) {
        // left for abort_abandoned()
    }
}

void S3BlobStore::upload_parts(const storage::OpenBlob& bytes, const std::string& object) {
    // S3 takes at most 10,000 parts: a blob larger than that many parts goes in larger ones.
    const auto part_size = std::max(options_.bucket.part_size, (bytes.size() + 9999) / 10000);
    const auto count = static_cast<int>((bytes.size() + part_size - 1) / part_size);
    const auto upload_id = client_.create_multipart(object);
    std::vector<Part> parts(static_cast<std::size_t>(count));
    std::atomic<int> next{0};
    std::mutex failed_mutex;
    std::exception_ptr failed;
    auto work = [&] {
        for (int n; (n = next++) < count;) {
            {
                std::lock_guard lock(failed_mutex);
                if (failed) return;
            }
            // A part's bytes are in memory until it is sent: bounded across every upload at once.
            {
                std::unique_lock lock(parts_mutex_);
                part_freed_.wait(lock, [&] { return parts_in_memory_ < 2 * options_.parallel_parts; });
                ++parts_in_memory_;
            }
            struct Held {
                S3BlobStore& store;
                ~Held() {
                    {
                        std::lock_guard lock(store.parts_mutex_);
                        --store.parts_in_memory_;
                    }
                    store.part_freed_.notify_one();
                }
            } held{*this};
            try {
                const auto offset = static_cast<std::uint64_t>(n) * part_size;
                MappedBuffer piece(static_cast<std::size_t>(std::min<std::uint64_t>(part_size, bytes.size() - offset)));
                if (bytes.read(offset, piece.span()) != piece.size())
                    throw std::runtime_error("a scratch file ended early");
                parts[static_cast<std::size_t>(n)] = {n + 1,
                                                      client_.upload_part(object, upload_id, n + 1, piece.span())};
            } catch (...) {
                std::lock_guard lock(failed_mutex);
                if (!failed) failed = std::current_exception();
            }
        }
    };
    std::vector<std::thread> threads;
    for (unsigned i = 1; i < std::min<unsigned>(options_.parallel_parts, static_cast<unsigned>(count)); ++i)
        threads.emplace_back(work);
    work();
    for (auto& thread : threads) thread.join();
    try {
        if (failed) std::rethrow_exception(failed);
        client_.complete_multipart(object, upload_id, parts);
    } catch (const Error& error) {
        // A bucket that did not answer in time (status 0) would likely keep the client waiting as
        // long again for the abort: the sweep aborts that upload later.
        if (error.status() != 0) abort_quietly(object, upload_id);
        throw;
    } catch (...) {
        abort_quietly(object, upload_id);
        throw;
    }
    ++multipart_uploads_;
}

}  // namespace berth::s3
