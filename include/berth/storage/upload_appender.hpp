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
#include <optional>
#include <span>
#include <string>

#include "berth/oci/digest.hpp"

namespace berth::storage {

// An upload's scratch file as it is appended to; UploadFiles (upload_files.hpp) creates, opens,
// verifies and commits it.
struct UploadFile {
    std::string id;                     // names the file
    std::optional<oci::Hasher> hasher;  // of the bytes up to offset; empty until rebuilt from the file
    std::uint64_t offset = 0;

private:
    friend class UploadFiles;
    friend class UploadAppender;
    int fd = -1;             // open while an appender holds it (a new session's: once made)
    bool committed = false;  // the file is a blob now, under another name
};

// What all appenders share: the receive buffers and the write and hash threads.
class UploadWriters {
public:
    UploadWriters();
    ~UploadWriters();  // runs what is queued, then joins
    UploadWriters(const UploadWriters&) = delete;
    UploadWriters& operator=(const UploadWriters&) = delete;
    // Memory held by the receive buffers of uploads being appended to.
    std::size_t buffer_bytes() const;
    // Waits until no piece is being written or hashed. What they finish may
    // call back into the server that owns the request (when_stored): it
    // drains these before it goes.
    void drain();

private:
    friend class UploadAppender;
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// What the caller decides about an upload: how large it may grow, whether
// the disk has room, and what happens when the appender lets it go.
struct UploadPolicy {
    std::uint64_t max_bytes = 0;  // 0: no limit
    // Throws when there is no room. Asked per space_check_bytes, not per
    // piece: it costs a statfs(2).
    std::function<void(std::uint64_t incoming)> require_space;
    static constexpr std::uint64_t space_check_bytes = 4 << 20;
    std::function<void()> release;
    // Makes and opens the file of a session that has none yet (its fd is -1), once there are
    // bytes to store or the append finishes; throws std::system_error. Runs off the I/O threads.
    std::function<void()> make_file;
};

class UploadAppender {
public:
    // Takes over a file its caller holds exclusively; calls policy.release
    // once every byte is stored (or when this constructor throws).
    UploadAppender(std::shared_ptr<UploadFile> file, UploadWriters& writers, UploadPolicy policy);
    ~UploadAppender();  // stores what finish() did not, then lets go of the file
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
    // While writes or hashes are in flight, takes `ready` to run on a write
    // worker once the last of them is done (on the one that wrote last, or
    // posted there by the hash worker that finished last), and returns true:
    // the caller need not give a thread over to waiting. False when nothing is
    // in flight (`ready` is left to the caller). `ready` may wait for the disk
    // but not for other pipeline work. Call once, after the last commit().
    bool when_stored(std::function<void()>& ready);
    // Copies bytes in through buffer() and commit(), waiting for room.
    void write(const void* data, std::size_t size);
    std::uint64_t offset() const;

private:
    struct Pipeline;
    void start();
    void submit();

    std::shared_ptr<UploadFile> state_;
    UploadWriters& writers_;
    UploadPolicy policy_;
    std::shared_ptr<Pipeline> pipeline_;
    std::uint64_t inline_bytes_ = 0;     // hashed on the caller's thread
    std::uint64_t unchecked_bytes_ = 0;  // committed since the disk's room was last asked
};

}  // namespace berth::storage
