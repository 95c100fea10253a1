#pragma once
// Bytes a TLS connection has yet to send. It grows without filling its new
// bytes first, since a record is encrypted straight into them.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>

namespace berth::http {

class SendBuffer {
public:
    const char* data() const { return bytes_.get(); }
    std::size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    std::size_t capacity() const { return capacity_; }

    // Makes room for n more bytes at the end, left for the caller to write;
    // returns where they start.
    char* grow(std::size_t n) {
        if (capacity_ - size_ < n) {
            const auto capacity = std::max(size_ + n, capacity_ * 2);
            auto bytes = std::make_unique_for_overwrite<char[]>(capacity);
            if (size_) std::memcpy(bytes.get(), bytes_.get(), size_);
            bytes_ = std::move(bytes);
            capacity_ = capacity;
        }
        size_ += n;
        return bytes_.get() + size_ - n;
    }
    void append(const void* data, std::size_t n) {
        if (n) std::memcpy(grow(n), data, n);
    }
    // Drops the first n bytes (they were sent).
    void consume(std::size_t n) {
        std::memmove(bytes_.get(), bytes_.get() + n, size_ - n);
        size_ -= n;
    }
    // Takes back the last n bytes grown (a record that could not be made).
    void shrink(std::size_t n) { size_ -= n; }
    void clear() { size_ = 0; }
    // Gives the memory back.
    void deallocate() {
        bytes_.reset();
        size_ = capacity_ = 0;
    }

private:
    std::unique_ptr<char[]> bytes_;
    std::size_t size_ = 0, capacity_ = 0;
};

}  // namespace berth::http
