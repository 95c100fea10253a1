// Blob content from a pool of random buffers plus a unique trailer; digests from cloned SHA-256 states.
#include "blobs.hpp"

#include <algorithm>

#include "options.hpp"
#include "pool_memory.hpp"

namespace berth::bench {

std::string hex(const unsigned char* p, std::size_t n) {
    static const char* digits = "0123456789abcdef";
    std::string out(n * 2, '0');
    for (std::size_t i = 0; i < n; ++i) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    return out;
}

std::string sha256_digest(const void* data, std::size_t n) {
    unsigned char md[32];
    unsigned int len = 0;
    EVP_Digest(data, n, md, &len, EVP_sha256(), nullptr);
    return "sha256:" + hex(md, 32);
}

BlobSet::BlobSet(std::uint64_t size, std::uint64_t seed) : size_(size), rng_{seed} {
    trailer_len_ = std::min<std::uint64_t>(64, size);
    prefix_len_ = size - trailer_len_;
    std::size_t n_pool = prefix_len_ == 0 ? 1 : std::clamp<std::uint64_t>((256 * MiB) / size, 1, 8);
    if (size >= 64 * MiB) n_pool = 2;
    pool_.resize(n_pool);
    for (auto& buf : pool_) {
        buf = allocate_pool_buffer(prefix_len_);  // lives as long as the process
        rng_.fill(buf, prefix_len_);
        EVP_MD_CTX* ctx = EVP_MD_CTX_new();
        EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
        EVP_DigestUpdate(ctx, buf, prefix_len_);
        prefix_ctx_.push_back(ctx);
    }
}

BlobSet::~BlobSet() {
    for (auto* c : prefix_ctx_) EVP_MD_CTX_free(c);
}

Blob BlobSet::make() {
    Blob b;
    b.pool_index = static_cast<std::uint32_t>(counter_++ % pool_.size());
    rng_.fill(b.trailer, sizeof b.trailer);
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    EVP_MD_CTX_copy_ex(ctx, prefix_ctx_[b.pool_index]);
    EVP_DigestUpdate(ctx, b.trailer, trailer_len_);
    unsigned char md[32];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx, md, &len);
    EVP_MD_CTX_free(ctx);
    b.digest = "sha256:" + hex(md, 32);
    return b;
}

std::vector<iovec> BlobSet::range(const Blob& b, std::uint64_t offset, std::uint64_t length) const {
    std::vector<iovec> out;
    std::uint64_t end = offset + length;
    if (offset < prefix_len_) {
        std::uint64_t e = std::min(end, prefix_len_);
        out.push_back({pool_[b.pool_index] + offset, static_cast<std::size_t>(e - offset)});
    }
    if (end > prefix_len_) {
        std::uint64_t s = std::max(offset, prefix_len_) - prefix_len_;
        out.push_back({const_cast<unsigned char*>(b.trailer) + s, static_cast<std::size_t>(end - prefix_len_ - s)});
    }
    return out;
}

}  // namespace berth::bench
