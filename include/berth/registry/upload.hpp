#pragma once
// Appending to an upload session. One appender holds a session exclusively;
// bytes are hashed and written in the same pass, so the state on disk and the
// digest state never disagree.
#include <cstddef>
#include <cstdint>
#include <memory>

namespace berth::registry {

struct UploadState;
class UploadTable;

class UploadAppender {
public:
    UploadAppender(std::shared_ptr<UploadState> state, UploadTable& table, std::uint64_t max_bytes);
    ~UploadAppender();
    UploadAppender(const UploadAppender&) = delete;
    UploadAppender& operator=(const UploadAppender&) = delete;

    void write(const void* data, std::size_t size);
    std::uint64_t offset() const;

private:
    std::shared_ptr<UploadState> state_;
    UploadTable& table_;
    std::uint64_t max_bytes_;
};

}  // namespace berth::registry
