#include "object_source.hpp"

#include "berth/storage/blob_writer.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace berth::s3 {

std::size_t ObjectSource::read(std::uint64_t offset, std::span<char> into) const {
    std::lock_guard lock(mutex_);
    std::size_t done = 0;
    while (done < into.size()) {
        const auto at = offset + done;
        if (at < buffer_offset_ || at >= buffer_offset_ + buffered_) {
            const auto want = std::min<std::uint64_t>(read_ahead, size_ > at ? size_ - at : 0);
            if (want == 0) break;  // the object ends here
            if (!buffer_.data()) buffer_ = MappedBuffer(read_ahead);
            buffer_offset_ = at;
            buffered_ = 0;
            client_.get(key_, at, want, [&](const char* data, std::size_t n) {
                if (n > buffer_.size() - buffered_) throw std::runtime_error("the bucket sent more than asked");
                std::memcpy(buffer_.data() + buffered_, data, n);
                buffered_ += n;
            });
            if (buffered_ == 0) break;  // the object ends here
        }
        const auto from = static_cast<std::size_t>(at - buffer_offset_);
        const auto n = std::min(into.size() - done, buffered_ - from);
        if (at == hashed_) {
            hasher_.update(buffer_.data() + from, n);
            hashed_ += n;
            if (hashed_ == size_ && hasher_.peek() != digest_)
                throw storage::DigestMismatch("the bucket's object for " + digest_.str() +
                                              " does not match its digest");
        }
        std::memcpy(into.data() + done, buffer_.data() + from, n);
        done += n;
    }
    return done;
}

}  // namespace berth::s3
