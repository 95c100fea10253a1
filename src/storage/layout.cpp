#include "berth/storage/layout.hpp"

#include "berth/oci/encoding.hpp"

namespace berth::storage::layout {

std::filesystem::path fetch_file(const std::filesystem::path& scratch_dir) {
    return scratch_dir / ("fetch-" + oci::random_hex(8));
}

}  // namespace berth::storage::layout
