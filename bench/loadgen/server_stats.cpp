// /proc/<pid>/stat and /proc/<pid>/status of the server under test.
#include "server_stats.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace berth::bench {

double proc_cpu_seconds(long pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    auto rp = text.rfind(')');
    if (rp == std::string::npos) return -1;
    std::istringstream in(text.substr(rp + 2));
    std::string field;
    std::vector<std::string> fields;
    while (in >> field) fields.push_back(field);
    // fields[0] is state (field 3); utime is field 14, stime field 15.
    if (fields.size() < 13) return -1;
    double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
    return (std::stod(fields[11]) + std::stod(fields[12])) / ticks;
}

std::uint64_t proc_status_kib(long pid, const char* key) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    std::size_t klen = std::strlen(key);
    while (std::getline(f, line))
        if (line.compare(0, klen, key) == 0 && line.size() > klen && line[klen] == ':')
            return std::strtoull(line.c_str() + klen + 1, nullptr, 10);
    return 0;
}

Sampler::Sampler(long pid) : pid_(pid) {
    if (!pid_) return;
    max_rss_ = proc_status_kib(pid_, "VmRSS");
    thread_ = std::thread([this] {
        std::unique_lock lock(mu_);
        while (!stop_) {
            cv_.wait_for(lock, std::chrono::milliseconds(20));
            max_rss_ = std::max(max_rss_, proc_status_kib(pid_, "VmRSS"));
        }
    });
}

std::uint64_t Sampler::finish() {
    if (!pid_) return 0;
    {
        std::lock_guard lock(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    return std::max(max_rss_, proc_status_kib(pid_, "VmRSS"));
}

ServerUsage ServerMonitor::finish() {
    ServerUsage u;
    u.max_rss_kib = sampler_.finish();
    const double cpu1 = pid_ ? proc_cpu_seconds(pid_) : -1;
    u.hwm_kib = pid_ ? proc_status_kib(pid_, "VmHWM") : 0;
    u.cpu_s = (pid_ && cpu0_ >= 0 && cpu1 >= 0) ? cpu1 - cpu0_ : -1;
    return u;
}

}  // namespace berth::bench
