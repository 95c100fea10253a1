#pragma once
// Appending to an upload session. One appender holds a session exclusively.
// Bytes are received into aligned buffers; each full buffer is written to the
// file with O_DIRECT (no copy into the page cache, which a fresh blob would
// only pollute) on a write worker and hashed on a hash worker while the next
// arrives. The unaligned tail of a request is written through the page cache
// and read back as the head of the next one. The appender lets go of the
// session only once every byte is written and hashed, so file and digest
// state never disagree for anyone else.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

namespace berth::registry {

struct UploadState;
class UploadTable;

class UploadAppender {
public:
    // Takes over a session acquired from the table.
    UploadAppender(std::shared_ptr<UploadState> state, UploadTable& table, std::uint64_t max_bytes);
    ~UploadAppender();  // stores what finish() did not, then lets go of the session
    UploadAppender(const UploadAppender&) = delete;
    UploadAppender& operator=(const UploadAppender&) = delete;

    // Room for the next bytes. Empty while every buffer is being written or
    // hashed; `resume` then runs (on a worker) once one is free.
    std::span<char> buffer(std::function<void()> resume);
    // The first `size` bytes of the last buffer() are the upload's next bytes.
    // Throws once a write has failed.
    void commit(std::size_t size);
    // Waits until every committed byte is in the file and hashed. Blocks: not
    // on an I/O thread. On a failed write, throws, leaving the session at the
    // bytes that did reach the file.
    void finish();
    // Runs `ready` once finish() has nothing in flight to wait for, on the
    // write or hash worker that stored the last of it (or on a write worker
    // if nothing is in flight): the caller need not give a thread over to
    // waiting. `ready` may block for the disk; it must not wait for other
    // pipeline work. Call once, after the last commit().
    void when_stored(std::function<void()> ready);
    // Copies bytes in through buffer() and commit(), waiting for room.
    void write(const void* data, std::size_t size);
    std::uint64_t offset() const;

private:
    struct Pipeline;
    void start();
    void submit();

    std::shared_ptr<UploadState> state_;
    UploadTable& table_;
    std::uint64_t max_bytes_;
    std::shared_ptr<Pipeline> pipeline_;
    std::uint64_t inline_bytes_ = 0;      // hashed on the caller's thread
};

}  // namespace berth::registry
