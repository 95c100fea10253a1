#include "address_book.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "berth/oci/json.hpp"

namespace berth::remote {
namespace {

constexpr std::size_t max_file = 64 << 10;
constexpr std::size_t max_addresses = 64;

nlohmann::json read_book(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    std::string text(max_file + 1, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<std::size_t>(in.gcount()));
    if (text.empty() || text.size() > max_file) return nlohmann::json::object();
    auto book = oci::parse_json(text);
    return book.is_object() ? book : nlohmann::json::object();
}

bool numeric(const std::string& host) {
    unsigned char buffer[16];
    return ::inet_pton(AF_INET, host.c_str(), buffer) == 1 || ::inet_pton(AF_INET6, host.c_str(), buffer) == 1;
}

}  // namespace

std::string url_key(const net::Url& url) {
    return (url.tls ? "https://" : "http://") + url.address.str() + url.path_prefix;
}

std::vector<net::HostPort> recall(const std::string& file, const std::string& key) {
    std::vector<net::HostPort> out;
    const auto book = read_book(file);
    auto it = book.find(key);
    if (it == book.end() || !it->is_array()) return out;
    for (auto& item : *it) {
        if (!item.is_string() || out.size() >= max_addresses) continue;
        try {
            auto address = net::parse_host_port(item.get<std::string>());
            if (numeric(address.host)) out.push_back(std::move(address));
        } catch (const std::invalid_argument&) {}
    }
    return out;
}

void remember(const std::string& file, const std::string& key, const std::vector<net::HostPort>& addresses) {
    auto book = read_book(file);
    nlohmann::json list = nlohmann::json::array();
    for (auto& address : addresses)
        if (list.size() < max_addresses) list.push_back(address.str());
    if (book.contains(key) && book[key] == list) return;
    book[key] = std::move(list);
    const auto text = book.dump(1);
    // A unique scratch name: the agent's two clients of the replicas may write at once.
    const auto scratch =
        file + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(reinterpret_cast<std::uintptr_t>(&list));
    // Durable before it replaces the old file: a power cut is when it is needed next.
    const int fd = ::open(scratch.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return;  // a full or read-only disk loses the memory, never a request
    const bool whole = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
    ::close(fd);
    if (!whole) {
        ::unlink(scratch.c_str());
        return;
    }
    if (::rename(scratch.c_str(), file.c_str()) != 0) ::unlink(scratch.c_str());
}

}  // namespace berth::remote
