#pragma once
#include <string_view>

namespace berth::oci::media_type {

inline constexpr std::string_view oci_manifest = "application/vnd.oci.image.manifest.v1+json";
inline constexpr std::string_view oci_index = "application/vnd.oci.image.index.v1+json";
inline constexpr std::string_view oci_config = "application/vnd.oci.image.config.v1+json";
inline constexpr std::string_view docker_config = "application/vnd.docker.container.image.v1+json";
// A config blob that describes a runnable image (platform, entrypoint, history).
inline bool image_config(std::string_view type) { return type == oci_config || type == docker_config; }
inline constexpr std::string_view oci_empty = "application/vnd.oci.empty.v1+json";
inline constexpr std::string_view docker_manifest = "application/vnd.docker.distribution.manifest.v2+json";
inline constexpr std::string_view docker_manifest_list = "application/vnd.docker.distribution.manifest.list.v2+json";
inline constexpr std::string_view docker_foreign_layer = "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip";
// Deprecated by the image-spec but valid: ".v1.tar", "+gzip", "+zstd". Never pushed.
// A filesystem layer a runtime unpacks (OCI tar, gzip, zstd, non-distributable, encrypted; Docker's).
inline bool layer(std::string_view type) {
    return type.starts_with("application/vnd.oci.image.layer.") ||
           type.starts_with("application/vnd.docker.image.rootfs.");
}
inline constexpr std::string_view oci_nondistributable_prefix = "application/vnd.oci.image.layer.nondistributable.";

}  // namespace berth::oci::media_type
