// Whether the kernel can encrypt what berth sends (kTLS), decided once at startup.
#include "session.hpp"

#include <linux/tls.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "berth/net/connect.hpp"
#include "berth/observe/log.hpp"

namespace berth::http {

namespace {

struct Descriptor {
    int fd;
    explicit Descriptor(int fd) : fd(fd) {}
    Descriptor(const Descriptor&) = delete;
    Descriptor& operator=(const Descriptor&) = delete;
    ~Descriptor() {
        if (fd >= 0) ::close(fd);
    }
};

// The ULPs the kernel has registered: "tls" once its module is loaded (or built in). Asking a
// socket for TCP_ULP "tls" instead would load the module where berth runs with CAP_NET_ADMIN,
// exposing it to every local user; loading it is the node's choice (docs/tls.md).
bool tls_module_loaded() {
    std::ifstream ulps("/proc/sys/net/ipv4/tcp_available_ulp");
    std::string name;
    while (ulps >> name)
        if (name == "tls") return true;
    return false;
}

// The module takes its cipher from the kernel's crypto API, which loads `gcm(aes)` where it is a
// module; a kernel that cannot load it refuses every AES-GCM key. So a TLS 1.2 AES-128-GCM send
// key (all zeros; 1.2 because every kernel with kTLS takes it, and 1.3 needs the same cipher) is
// offered to one end of a loopback connection, as a session offers its own: the `tls` layer
// attaches only to an established TCP connection. True only when the kernel says it has no such
// cipher. A probe that cannot run, or fails otherwise, leaves each connection to find out for
// itself.
bool refuses_aes_gcm() {
    Descriptor listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    const auto* any = reinterpret_cast<sockaddr*>(&address);
    if (listener.fd < 0 || ::bind(listener.fd, any, sizeof address) != 0 || ::listen(listener.fd, 1) != 0 ||
        ::getsockname(listener.fd, reinterpret_cast<sockaddr*>(&address), &length) != 0)
        return false;
    // At most a second: a loopback a firewall drops must not hold up startup.
    Descriptor client(net::connect_within(any, sizeof address, std::chrono::seconds(1)));
    if (client.fd < 0) return false;
    int error = 0;
    if (::setsockopt(client.fd, SOL_TCP, TCP_ULP, "tls", sizeof "tls") != 0) {
        error = errno;
    } else {
        tls12_crypto_info_aes_gcm_128 keys{};
        keys.info.version = TLS_1_2_VERSION;
        keys.info.cipher_type = TLS_CIPHER_AES_GCM_128;
        if (::setsockopt(client.fd, SOL_TLS, TLS_TX, &keys, sizeof keys) == 0) return false;
        error = errno;
        if (error == ENOENT) return true;
    }
    observe::log("warning", "the kernel's tls module refused berth's trial key; each connection tries it",
                 {{"error", std::strerror(error)}});
    return false;
}

struct KernelTls {
    bool available = false;
    std::string why_not;
};

const KernelTls& kernel_tls() {
    static const KernelTls decided = [] {
        if (!tls_module_loaded()) return KernelTls{false, "the kernel has no tls module"};
        if (refuses_aes_gcm())
            return KernelTls{false, "the kernel's tls module has no AES-GCM: its crypto API could not load gcm(aes)"};
        return KernelTls{true, {}};
    }();
    return decided;
}

}  // namespace

bool kernel_tls_available() { return kernel_tls().available; }

std::string tls_sending_said(bool kernel_tls_wanted, bool berth_records) {
    if (kernel_tls_wanted && kernel_tls_available()) return "the kernel encrypts (kTLS): blobs go out with sendfile";
    std::string why = kernel_tls_wanted ? kernel_tls().why_not : "tls.kernel_tls is false";
    if (berth_records) return "berth seals TLS 1.3 AES-GCM records itself, OpenSSL the rest (" + why + ")";
    return "OpenSSL encrypts (" + why + "; tls.berth_records is false)";
}

}  // namespace berth::http
