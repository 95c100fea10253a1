#include "berth/auth/delegated.hpp"

#include "berth/net/host_port.hpp"

namespace berth::auth {

std::string access_target(const std::string& repository) {
    if (repository.empty()) return "/v2/";
    return std::string(access_path) + "?repository=" + net::query_escape(repository);
}

}  // namespace berth::auth
