#pragma once
// Appending to an upload session. One appender holds a session exclusively.
// Each piece is written to the file at once and hashed on a hash worker while
// the next one arrives; the appender lets go of the session only once every
// written byte is hashed, so file and digest state never disagree for anyone else.
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
    UploadAppender(std::shared_ptr<UploadState> state, UploadTable& table, std::uint64_t max_bytes);
    ~UploadAppender();  // waits for the hashing of what was written
    UploadAppender(const UploadAppender&) = delete;
    UploadAppender& operator=(const UploadAppender&) = delete;

    // Room for the next bytes. Empty while every buffer waits to be hashed;
    // `resume` then runs (on a hash worker) once one is free.
    std::span<char> buffer(std::function<void()> resume);
    // Writes the first `size` bytes of the last buffer() and queues them for hashing.
    void commit(std::size_t size);
    // Copies bytes in through buffer() and commit(), waiting for room.
    void write(const void* data, std::size_t size);
    std::uint64_t offset() const;

private:
    struct Pipeline;
    std::shared_ptr<UploadState> state_;
    UploadTable& table_;
    std::uint64_t max_bytes_;
    std::shared_ptr<Pipeline> pipeline_;  // made on the first buffer()
    std::uint64_t inline_bytes_ = 0;      // hashed on the caller's thread
};

}  // namespace berth::registry
