#include "agent_peers.hpp"

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "berth/oci/json.hpp"
#include "berth/oci/paths.hpp"
#include "berth/observe/log.hpp"

namespace berth::proxy {
namespace {

constexpr std::size_t max_agents = 20000;
constexpr std::size_t max_answer = 4 << 20;
constexpr std::size_t max_sources = 3;
// A chain longer than this costs more in latency (a piece per hop) than a binary tree loses in
// bandwidth (each agent serving two).
constexpr std::size_t max_chain = 16;
constexpr auto distrust_for = std::chrono::hours(1);
// A replica that does not answer an announce within this is skipped for the round: the others
// must hear the agent before they forget it (AgentRoster::window).
constexpr auto announce_wait = std::chrono::seconds(5);

net::ClientOptions peer_client_options() {
    net::ClientOptions options;
    options.connect_timeout = std::chrono::milliseconds(1000);
    // A fellow agent may have to start its own fetch before it answers.
    options.header_timeout = std::chrono::milliseconds(10000);
    // A stalled agent costs its downstream this long before they ask the next source.
    options.idle_timeout = std::chrono::milliseconds(5000);
    options.io_threads = 1;
    return options;
}

// An address a fellow agent can be at: numeric, and none that would take this agent to itself or
// nowhere (loopback, unspecified, link-local, multicast).
bool agent_address(const std::string& text) {
    try {
        auto address = net::parse_host_port(text);
        unsigned char v4[4], v6[16];
        if (::inet_pton(AF_INET, address.host.c_str(), v4) == 1)
            return v4[0] != 127 && v4[0] != 0 && !(v4[0] == 169 && v4[1] == 254) && v4[0] < 224;
        if (::inet_pton(AF_INET6, address.host.c_str(), v6) != 1) return false;
        static const unsigned char zero[16] = {};
        const bool unspecified_or_loopback = std::memcmp(v6, zero, 15) == 0 && v6[15] <= 1;
        const bool link_local = v6[0] == 0xfe && (v6[1] & 0xc0) == 0x80;
        const bool mapped = std::memcmp(v6, zero, 10) == 0 && v6[10] == 0xff && v6[11] == 0xff;
        return !unspecified_or_loopback && !link_local && v6[0] != 0xff && !mapped;
    } catch (const std::invalid_argument&) {
        return false;
    }
}

std::uint64_t score(const std::string& digest, const std::string& agent) {
    const auto hex = oci::Digest::of(oci::DigestAlgorithm::sha256, digest + '\0' + agent).hex();
    return std::stoull(hex.substr(0, 16), nullptr, 16);
}

}  // namespace

AgentPeers::AgentPeers(const AgentPeering& options, const Upstream& replicas)
    : options_(options), client_(peer_client_options()) {
    tls_.enabled = true;
    tls_.ca_file = options_.ca_file;
    tls_.cert_file = replicas.cert_file;
    tls_.key_file = replicas.key_file;
    tls_.server_name = options_.server_name;
    if (options_.node.empty()) {
        char name[256] = {};
        if (::gethostname(name, sizeof name - 1) == 0) options_.node = name;
    }
}

void AgentPeers::announce(remote::RegistryClient& replicas) {
    nlohmann::json told = {{"port", options_.port}, {"node", options_.node}};
    const auto text = told.dump();
    const remote::Body body{text.size(), [&](net::Exchange& exchange) { exchange.write(text); }};
    std::set<std::string> heard;
    std::string self;
    for (auto& answer : replicas.request_each("POST", "/_berth/v1/agents", max_answer, announce_wait, &body)) {
        if (answer.status != 200) continue;
        auto doc = oci::parse_json(answer.body);
        if (!doc.is_object() || !doc["agents"].is_array()) continue;
        if (auto& you = doc["you"]; you.is_string() && agent_address(you.get<std::string>()))
            self = you.get<std::string>();
        for (auto& agent : doc["agents"])
            if (agent.is_object() && agent["address"].is_string() && heard.size() < max_agents &&
                agent_address(agent["address"].get<std::string>()))
                heard.insert(agent["address"].get<std::string>());
    }
    if (self.empty()) return;  // no replica answered: keep what was known
    heard.insert(self);
    std::lock_guard lock(mutex_);
    self_ = std::move(self);
    agents_.assign(heard.begin(), heard.end());
}

std::vector<std::string> ancestors(const std::string& digest, const std::vector<std::string>& agents,
                                   const std::string& self, std::size_t seeds) {
    std::vector<std::pair<std::uint64_t, std::string>> ranked;
    ranked.reserve(agents.size());
    for (auto& agent : agents) ranked.emplace_back(score(digest, agent), agent);
    std::sort(ranked.begin(), ranked.end(), std::greater<>());
    auto me = std::find_if(ranked.begin(), ranked.end(), [&](auto& entry) { return entry.second == self; });
    std::vector<std::string> out;
    if (me == ranked.end() || seeds == 0) return out;
    const std::size_t count = ranked.size();
    const std::size_t fanout = count - std::min(count, seeds) > seeds * max_chain ? 2 : 1;
    for (auto position = static_cast<std::size_t>(me - ranked.begin()); position >= seeds;) {
        position = (position - seeds) / fanout;
        out.push_back(ranked[position].second);
    }
    return out;
}

std::vector<std::string> AgentPeers::sources(const std::string& digest) const {
    std::vector<std::string> agents;
    std::string self;
    {
        std::lock_guard lock(mutex_);
        agents = agents_;
        self = self_;
    }
    std::vector<std::string> out;
    const auto now = Clock::now();
    std::lock_guard lock(mutex_);
    std::erase_if(distrusted_, [&](auto& entry) { return entry.second <= now; });
    for (auto& parent : ancestors(digest, agents, self, options_.seeds)) {
        if (distrusted_.count(parent)) continue;
        out.push_back(parent);
        if (out.size() == max_sources) break;
    }
    return out;
}

remote::Opened AgentPeers::open(const std::string& address, const std::string& name, const oci::Digest& digest,
                                std::uint64_t offset) {
    net::RequestHead head{"GET", oci::path::blob(name, digest.str()), {}, std::nullopt, false, std::nullopt};
    if (offset) head.headers.emplace_back("Range", "bytes=" + std::to_string(offset) + "-");
    remote::Opened opened{client_.open({net::parse_host_port(address), tls_}, std::move(head)), nullptr};
    opened.head = &opened.exchange->read_head();
    return opened;
}

void AgentPeers::distrust(const std::string& address) {
    std::lock_guard lock(mutex_);
    distrusted_[address] = Clock::now() + distrust_for;
}

void AgentPeers::write_metrics(observe::MetricsWriter& out) const {
    using observe::Metric;
    std::size_t known;
    {
        std::lock_guard lock(mutex_);
        known = agents_.size();
    }
    out.add(Metric::agent_peers, static_cast<double>(known));
    out.add(Metric::agent_blob_bytes_total, {{"source", "agents"}}, static_cast<double>(bytes_from_agents.load()));
    constexpr const char* reasons[] = {"unreachable", "refused", "corrupt"};
    for (int i = 0; i < 3; ++i)
        out.add(Metric::agent_peer_failures_total, {{"reason", reasons[i]}}, static_cast<double>(failures_[i].load()));
}

}  // namespace berth::proxy
