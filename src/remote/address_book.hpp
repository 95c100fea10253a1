#pragma once
// The addresses a client's URLs last resolved to, kept in a small file so that a restart can
// reach them while their name has no answer (the node agent at a cold cluster start: CoreDNS
// not up yet, or the replicas' headless Service without Ready endpoints). The file is the
// client's own; still, what it reads is checked like any address.
#include <string>
#include <vector>

#include "berth/net/host_port.hpp"

namespace berth::remote {

// "https://host:port/prefix": how the file names a URL.
std::string url_key(const net::Url& url);
// The numeric addresses remembered for the URL; empty when none (or the file is unreadable).
std::vector<net::HostPort> recall(const std::string& file, const std::string& key);
// Records the URL's addresses, writing the file (atomically) only when they changed.
void remember(const std::string& file, const std::string& key, const std::vector<net::HostPort>& addresses);

}  // namespace berth::remote
