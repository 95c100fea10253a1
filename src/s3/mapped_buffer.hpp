#pragma once
// A buffer of parts' and read-ahead's size (megabytes) mapped straight from the kernel and unmapped
// when it goes: malloc would keep such buffers in its arenas after they are freed, and eight
// concurrent transfers would leave the process hundreds of MiB larger.
#include <sys/mman.h>

#include <cstddef>
#include <new>
#include <span>
#include <utility>

namespace berth::s3 {

class MappedBuffer {
public:
    MappedBuffer() = default;
    explicit MappedBuffer(std::size_t size) : size_(size) {
        if (!size) return;
        void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) throw std::bad_alloc();
        data_ = static_cast<char*>(p);
    }
    MappedBuffer(MappedBuffer&& other) noexcept
        : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
    MappedBuffer& operator=(MappedBuffer&& other) noexcept {
        std::swap(data_, other.data_);
        std::swap(size_, other.size_);
        return *this;
    }
    ~MappedBuffer() {
        if (data_) ::munmap(data_, size_);
    }
    char* data() const { return data_; }
    std::size_t size() const { return size_; }
    std::span<char> span() const { return {data_, size_}; }

private:
    char* data_ = nullptr;
    std::size_t size_ = 0;
};

}  // namespace berth::s3
