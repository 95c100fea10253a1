#include "upload_buffers.hpp"

#include <sys/mman.h>

#include <new>

namespace berth::storage {

UploadBuffers::~UploadBuffers() {
    for (auto* bytes : spare_) ::munmap(bytes, buffer_bytes_);
}

UploadBuffers::Buffer UploadBuffers::take() {
    {
        std::lock_guard lock(mutex_);
        if (!spare_.empty()) {
            auto* bytes = spare_.back();
            spare_.pop_back();
            return Buffer(bytes, GiveBack{this});
        }
    }
    void* bytes = ::mmap(nullptr, buffer_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (bytes == MAP_FAILED) throw std::bad_alloc();
    return Buffer(static_cast<char*>(bytes), GiveBack{this});
}

void UploadBuffers::give_back(char* bytes) {
    {
        std::lock_guard lock(mutex_);
        if (spare_.size() < keep_) {
            spare_.push_back(bytes);
            return;
        }
    }
    ::munmap(bytes, buffer_bytes_);
}

}  // namespace berth::storage
