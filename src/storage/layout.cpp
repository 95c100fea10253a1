#include "berth/storage/layout.hpp"

#include <openssl/rand.h>

namespace berth::storage::layout {

std::filesystem::path fetch_file(const std::filesystem::path& scratch_dir) {
    unsigned char bytes[8];
    RAND_bytes(bytes, sizeof bytes);
    std::string name = "fetch-";
    for (auto b : bytes) {
        static constexpr char hex[] = "0123456789abcdef";
        name += hex[b >> 4];
        name += hex[b & 15];
    }
    return scratch_dir / name;
}

}  // namespace berth::storage::layout
