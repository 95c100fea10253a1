#include "validate.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>
#include <vector>

#include "berth/oci/error.hpp"
#include "berth/oci/names.hpp"

namespace berth::registry {

using oci::Error;
using oci::ErrorCode;

void require_name(const std::string& repo) {
    if (!oci::valid_repository_name(repo))
        throw Error(ErrorCode::name_invalid, "invalid repository name", repo.substr(0, 300));
}

void require_tag(const std::string& tag) {
    if (!oci::valid_tag(tag)) throw Error(ErrorCode::tag_invalid, "invalid tag", tag.substr(0, 200));
}

Reference parse_reference(const std::string& reference, Access access) {
    if (reference.find(':') != std::string::npos) return oci::Digest::parse_or_throw(reference);
    if (access == Access::read && !oci::valid_tag(reference))
        throw Error(ErrorCode::manifest_unknown, "manifest unknown", reference.substr(0, 200));
    require_tag(reference);
    return reference;
}

oci::Digest hash_file(const std::filesystem::path& path, oci::DigestAlgorithm algorithm) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw std::system_error(errno, std::generic_category(), "open " + path.string());
    oci::Hasher hasher(algorithm);
    std::vector<char> buffer(1 << 20);
    while (true) {
        auto n = ::read(fd, buffer.data(), buffer.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int saved = errno;
            ::close(fd);
            throw std::system_error(saved, std::generic_category(), "read " + path.string());
        }
        if (n == 0) break;
        hasher.update(buffer.data(), static_cast<std::size_t>(n));
    }
    ::close(fd);
    return hasher.peek();
}

void require_writable(const Options& options) {
    if (options.pull_only)
        throw oci::Error(oci::ErrorCode::unsupported, "this node agent serves pulls only: push to the registry");
}

}  // namespace berth::registry
