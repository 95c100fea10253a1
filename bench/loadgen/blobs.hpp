#pragma once
// Random blob content and its digests, all prepared before the clock starts. A small pool
// of random buffers supplies the bulk of each blob and a unique random 64-byte trailer
// makes every blob distinct. Because the trailer comes last, the SHA-256 state after each
// pool buffer is computed once and cloned per blob, so even millions of 100 MiB blob
// digests cost almost nothing.
#include <openssl/evp.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace berth::bench {

// A fast deterministic generator (SplitMix64) for content that only has to be distinct.
struct SplitMix {
    std::uint64_t s;
    std::uint64_t next() {
        std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    void fill(unsigned char* p, std::size_t n) {
        while (n >= 8) {
            std::uint64_t v = next();
            std::memcpy(p, &v, 8);
            p += 8;
            n -= 8;
        }
        if (n) {
            std::uint64_t v = next();
            std::memcpy(p, &v, n);
        }
    }
};

// Lower-case hex of n bytes.
std::string hex(const unsigned char* p, std::size_t n);

// "sha256:<hex>" of n bytes.
std::string sha256_digest(const void* data, std::size_t n);

// A blob = pool[pool_index][0, prefix) followed by its own trailer (up to 64 bytes).
struct Blob {
    std::uint32_t pool_index = 0;
    unsigned char trailer[64];
    std::string digest;
};

// The blobs of one size, made from one seed.
class BlobSet {
public:
    BlobSet(std::uint64_t size, std::uint64_t seed);
    ~BlobSet();
    BlobSet(const BlobSet&) = delete;
    BlobSet& operator=(const BlobSet&) = delete;

    // A new blob, digest included.
    Blob make();
    // iovecs covering [offset, offset + length) of the blob.
    std::vector<iovec> range(const Blob& b, std::uint64_t offset, std::uint64_t length) const;
    std::uint64_t size() const { return size_; }

private:
    std::uint64_t size_, prefix_len_, trailer_len_;
    SplitMix rng_;
    std::uint64_t counter_ = 0;
    std::vector<unsigned char*> pool_;
    std::vector<EVP_MD_CTX*> prefix_ctx_;
};

}  // namespace berth::bench
