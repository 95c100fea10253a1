#include "berth/config/config.hpp"

#include "section.hpp"

#include "berth/auth/authorizer.hpp"
#include "berth/net/host_port.hpp"
#include "berth/oci/json.hpp"
#include "berth/oci/names.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <set>
#include <sstream>

namespace berth::config {
namespace {

// `<stem>_days` (fractions allowed) or `<stem>_seconds`, not both.
void age(Section& s, const std::string& where, const std::string& stem, std::optional<std::chrono::seconds>& out) {
    s.days((stem + "_days").c_str(), out);
    if (s.has((stem + "_seconds").c_str())) {
        if (out) throw ConfigError(where + ": give " + stem + "_days or " + stem + "_seconds, not both");
        std::uint64_t seconds = 0;
        s.number((stem + "_seconds").c_str(), seconds, 36500ull * 86400);
        out = std::chrono::seconds(seconds);
    }
}

registry::RetentionPolicy retention_policy(const json& value, const std::string& where) {
    Section s(value, where);
    registry::RetentionPolicy policy;
    policy.name = where;
    s.string("name", policy.name, false);
    s.strings("repositories", policy.repositories);
    s.number("keep_last", policy.keep_last, 1000000);
    if (s.has("keep_last") && policy.keep_last < 1) throw ConfigError(where + ".keep_last must be at least 1");
    s.strings("keep_tags", policy.keep_tags);
    s.strings("expire_tags", policy.expire_tags);
    age(s, where, "expire_unpulled", policy.expire_unpulled);
    age(s, where, "delete_untagged_after", policy.untagged_after);
    s.finish();
    if (policy.repositories.empty()) throw ConfigError(where + ".repositories must list repository globs");
    check_repository_globs(where + ".repositories", policy.repositories);
    for (auto* globs : {&policy.keep_tags, &policy.expire_tags})
        for (auto& glob : *globs)
            if (glob.size() > 256 ||
                glob.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-*") !=
                    std::string::npos)
                throw ConfigError(where + (globs == &policy.keep_tags ? ".keep_tags" : ".expire_tags") + ": \"" + glob +
                                  "\" is not a tag glob ('*' and a tag's characters)");
    if (!policy.judges_tags() && !policy.untagged_after)
        throw ConfigError(where +
                          " has no rule: give keep_last, expire_tags, expire_unpulled_days or "
                          "delete_untagged_after_days");
    if (!policy.keep_tags.empty() && !policy.judges_tags())
        throw ConfigError(where +
                          ".keep_tags only keeps tags from keep_last, expire_tags and expire_unpulled, "
                          "and none is given");
    return policy;
}

void read_quotas(const json& list, Reading& r) {
    for (std::size_t i = 0; i < list.size(); ++i) {
        const auto where = "quotas[" + std::to_string(i) + "]";
        Section q(list[i], where);
        registry::QuotaRule rule;
        q.string("namespaces", rule.namespaces, false);
        q.number("max_bytes", rule.max_bytes, UINT64_MAX);
        q.number("max_repositories", rule.max_repositories, UINT32_MAX);
        q.finish();
        if (rule.namespaces.empty()) throw ConfigError(where + ".namespaces is required");
        // A namespace is one path component: no '/'.
        if (rule.namespaces.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789._-*") != std::string::npos)
            throw ConfigError(where + ".namespaces: \"" + rule.namespaces +
                              "\" is not a namespace glob (lower-case letters, digits, . _ - and *)");
        // Zero would refuse every push; an absent limit is no limit.
        for (auto* key : {"max_bytes", "max_repositories"})
            if (list[i].contains(key) && list[i][key] == 0)
                throw ConfigError(where + "." + key + " must be at least 1 (leave it out for no limit)");
        for (auto& other : r.config.registry.quotas)
            if (other.namespaces == rule.namespaces)
                throw ConfigError(where + ".namespaces: \"" + rule.namespaces + "\" is listed twice");
        r.config.registry.quotas.push_back(std::move(rule));
    }
}

void read_limits(Section& s, Reading& r) {
    s.number("max_manifest_bytes", r.config.registry.max_manifest_bytes, 64ull << 20);
    // Beast keeps a field's length in 16 bits and throws past it: a head
    // no larger than 64 KiB cannot hold such a field.
    s.number("max_header_bytes", r.config.server.max_header_bytes, 64 << 10);
    s.number("max_uploads", r.config.registry.max_uploads, 1000000);
    s.number("max_uploads_per_client", r.config.registry.max_uploads_per_client, 1000000);
    s.number("min_free_disk_bytes", r.config.registry.min_free_bytes, UINT64_MAX);
    s.number("max_connections_per_client", r.config.server.max_connections_per_client, 1000000);
    s.number("requests_per_second_per_client", r.config.server.requests_per_second, 10000000);
    s.number("max_blob_bytes", r.config.registry.max_blob_bytes, UINT64_MAX);
    s.number("max_page", r.config.registry.max_page, 100000);
    s.number("max_connections", r.config.server.max_connections, 1000000);
    s.seconds("idle_timeout_seconds", r.config.server.idle_timeout);
    s.seconds("body_timeout_seconds", r.config.server.body_timeout);
}

void read_tcp(Section& s, Reading& r) {
    auto& name = r.config.server.same_host_congestion;
    s.string("same_host_congestion_control", name);
    // The kernel's names: at most 15 characters (TCP_CA_NAME_MAX less the NUL).
    if (name.size() > 15 || name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_-") != std::string::npos)
        throw ConfigError("tcp.same_host_congestion_control must be a congestion control's name, such as reno");
}

void read_replication(Section& s, Reading& r) {
    s.strings("peers", r.config.replication.peers);
    s.string("peer_dns", r.config.replication.peer_dns);
    s.string("secret_file", r.secret_file);
    s.string("write_quorum", r.quorum);
    std::uint64_t timeout = 10, poll = 100;
    s.number("quorum_timeout_seconds", timeout, 3600);
    s.number("poll_interval_ms", poll, 60000);
    s.number("bootstrap_parallelism", r.config.replication.bootstrap_parallelism, 256);
    s.seconds("log_retention_seconds", r.config.replication.log_retention.window);
    s.number("log_max_entries", r.config.replication.log_retention.max_entries, UINT64_MAX);
    s.string("ca_file", r.config.replication.tls.ca_file);
    r.config.replication.quorum_timeout = std::chrono::seconds(timeout);
    r.config.replication.poll_interval = std::chrono::milliseconds(std::max<std::uint64_t>(poll, 10));
}

void read_tls(Section& s, Reading& r) {
    auto& o = r.config.server;
    s.string("cert", o.tls_cert_file);
    s.string("key", o.tls_key_file);
    s.string("client_ca", o.tls_client_ca_file);
    std::string client_auth = "require";
    s.string("client_auth", client_auth);
    if (client_auth != "require" && client_auth != "optional")
        throw ConfigError("tls.client_auth must be \"require\" or \"optional\"");
    o.tls_client_cert_required = client_auth == "require";
    s.boolean("kernel_tls", o.tls_kernel);
    s.boolean("berth_records", o.tls_berth_records);
    s.string("ciphers", o.tls_ciphers);
    if (o.tls_cert_file.empty() != o.tls_key_file.empty()) throw ConfigError("tls needs both cert and key");
    if (!o.tls_client_ca_file.empty() && o.tls_cert_file.empty()) throw ConfigError("tls.client_ca needs cert and key");
    for (auto* file : {&o.tls_cert_file, &o.tls_key_file, &o.tls_client_ca_file})
        if (!file->empty()) *file = r.path_of(*file);
}

// Credentials and trust of a registry berth reads from: upstreams, and the agent's replicas.
void read_remote_keys(Section& s, const std::string& where, proxy::Upstream& upstream, const Reading& r) {
    std::string password_file;
    s.string("ca_file", upstream.ca_file);
    s.boolean("insecure", upstream.insecure);
    s.string("username", upstream.username);
    s.string("password_file", password_file);
    if (!upstream.ca_file.empty()) upstream.ca_file = readable_file(where + ".ca_file", r.path_of(upstream.ca_file));
    if (upstream.username.empty() != password_file.empty())
        throw ConfigError(where + ": username and password_file go together");
    if (!password_file.empty()) upstream.password = secret_from(where + ".password_file", r.path_of(password_file));
}

void read_upstream(Section& u, const std::string& where, Reading& r) {
    proxy::Upstream upstream;
    std::string url;
    u.string("host", upstream.host, false);
    u.string("url", url, false);
    read_remote_keys(u, where, upstream, r);
    u.seconds("check_interval_seconds", upstream.check_interval);
    u.number("max_concurrent", upstream.max_concurrent, 1024);
    u.seconds("fetch_timeout_seconds", upstream.fetch_timeout);
    u.number("min_bytes_per_second", upstream.min_bytes_per_second, UINT64_MAX);
    u.strings("token_realms", upstream.token_realms);
    u.finish();
    if (upstream.fetch_timeout.count() == 0) throw ConfigError(where + ".fetch_timeout_seconds must be at least 1");
    for (auto& realm : upstream.token_realms) check_url(where + ".token_realms", realm);
    if (upstream.host.empty()) throw ConfigError(where + ".host is required");
    if (url.empty()) throw ConfigError(where + ".url is required");
    // The host becomes the first component of repository names: no port, no capitals.
    if (!oci::valid_registry_host(upstream.host) || upstream.host.find(':') != std::string::npos ||
        !oci::valid_repository_name(upstream.host))
        throw ConfigError(where + ".host: \"" + upstream.host +
                          "\" is not a lower-case registry host name without a port");
    check_url(where + ".url", url);
    upstream.urls = {url};
    if (upstream.max_concurrent == 0) throw ConfigError(where + ".max_concurrent must be at least 1");
    for (auto& other : r.config.proxy.upstreams)
        if (other.host == upstream.host) throw ConfigError(where + ".host: \"" + upstream.host + "\" is listed twice");
    r.config.proxy.upstreams.push_back(std::move(upstream));
}

void read_agent(Section& s, Reading& r) {
    proxy::Upstream replicas;
    s.strings("replicas", replicas.urls);
    read_remote_keys(s, "agent", replicas, r);
    s.string("cert_file", replicas.cert_file);
    s.string("key_file", replicas.key_file);
    std::string authorize = "caller";
    s.string("authorize", authorize);
    if (authorize != "caller" && authorize != "agent")
        throw ConfigError("agent.authorize must be \"caller\" (the replicas decide for each caller) or \"agent\"");
    r.config.proxy.agent_authorize =
        authorize == "caller" ? proxy::Options::Authorize::caller : proxy::Options::Authorize::agent;
    s.seconds("decision_seconds", r.config.proxy.agent_decision_ttl);
    s.seconds("outage_decision_seconds", r.config.proxy.agent_outage_ttl);
    if (r.config.proxy.agent_decision_ttl.count() > 300)
        throw ConfigError("agent.decision_seconds must be at most 300");
    if (replicas.urls.empty()) throw ConfigError("agent.replicas must list the replicas' URLs");
    for (std::size_t i = 0; i < replicas.urls.size(); ++i)
        check_url("agent.replicas[" + std::to_string(i) + "]", replicas.urls[i]);
    if (replicas.cert_file.empty() != replicas.key_file.empty())
        throw ConfigError("agent: cert_file and key_file go together");
    if (!replicas.cert_file.empty()) {
        replicas.cert_file = readable_file("agent.cert_file", r.path_of(replicas.cert_file));
        replicas.key_file = readable_file("agent.key_file", r.path_of(replicas.key_file));
    }
    s.section("runtime", [&](Section& rt) { read_runtime_files(rt, r); });
    read_keep_images(s, r);
    s.section("peers", [&](Section& p) { read_agent_peers(p, r); });
    s.section("preheat", [&](Section& p) { read_preheat(p, r); });
    if (auto& peers = r.config.proxy.peers) {
        if (replicas.cert_file.empty())
            throw ConfigError("agent.peers: agents reach each other over mTLS, so cert_file and key_file are needed");
        if (peers->ca_file.empty()) peers->ca_file = replicas.ca_file;
        if (peers->ca_file.empty())
            throw ConfigError("agent.peers: ca_file (or agent.ca_file) must sign fellow agents");
    }
    // Replicas answer a tag from their own cache: asking them each time costs one local round trip.
    replicas.check_interval = std::chrono::seconds(0);
    replicas.max_concurrent = 64;
    r.config.proxy.agent = true;
    r.config.proxy.upstreams.insert(r.config.proxy.upstreams.begin(), std::move(replicas));
}

// What holds only for the sections together.
void check_combinations(Reading& r) {
    if (r.config.replication.log_retention.max_entries < 1000)
        throw ConfigError("replication.log_max_entries must be at least 1000");
    if (r.config.proxy.agent) {
        if (r.config.proxy.upstreams.size() > 1)
            throw ConfigError("agent and proxy.upstreams exclude each other: the replicas reach the upstreams");
        if (r.config.replication.enabled()) throw ConfigError("agent and replication exclude each other");
        if (!r.config.retention.policies.empty())
            throw ConfigError(
                "agent and retention.policies exclude each other: the agent's cache is bounded by "
                "cache.max_bytes");
        if (r.config.auth.enabled())
            throw ConfigError("agent and auth exclude each other: the replicas decide who may pull (agent.authorize)");
        if (!r.config.registry.policies.empty())
            throw ConfigError("agent and policies exclude each other: the replicas enforce them");
        r.config.registry.pull_only = true;
        if (r.config.proxy.runtime) r.config.proxy.runtime->mirror = agent_mirror_url(r.config.server);
    } else if (r.config.proxy.cache_max_bytes) {
        throw ConfigError("cache.max_bytes bounds the node agent's cache: it needs agent");
    }
    // Replicas serving TLS reach each other over TLS, trusting replication.ca_file (else
    // tls.client_ca, else the system) and presenting their own certificate.
    if (r.config.server.tls()) {
        auto& peer_tls = r.config.replication.tls;
        peer_tls.enabled = true;
        if (peer_tls.ca_file.empty()) peer_tls.ca_file = r.config.server.tls_client_ca_file;
        else peer_tls.ca_file = readable_file("replication.ca_file", r.path_of(peer_tls.ca_file));
        peer_tls.cert_file = r.config.server.tls_cert_file;
        peer_tls.key_file = r.config.server.tls_key_file;
    } else if (!r.config.replication.tls.ca_file.empty()) {
        throw ConfigError("replication.ca_file is for replicas serving TLS: it needs tls.cert and tls.key");
    }
    if (!r.config.auth.rules.empty() && !r.config.auth.enabled())
        throw ConfigError("auth.rules need auth.htpasswd, auth.token, auth.oidc or auth.ldap to know who is asking");
    if (r.quorum == "local") r.config.replication.write_quorum = replication::WriteQuorum::local;
    else if (r.quorum == "quorum") r.config.replication.write_quorum = replication::WriteQuorum::quorum;
    else if (r.quorum == "all") r.config.replication.write_quorum = replication::WriteQuorum::all;
    else throw ConfigError("replication.write_quorum must be \"local\", \"quorum\" or \"all\"");
    try {
        for (auto& peer : r.config.replication.peers) net::parse_host_port(peer);
        if (!r.config.replication.peer_dns.empty()) net::parse_host_port(r.config.replication.peer_dns, "5000");
    } catch (const std::invalid_argument& error) {
        throw ConfigError(std::string("replication: ") + error.what());
    }
    if (r.config.replication.enabled()) {
        if (r.secret_file.empty()) throw ConfigError("replication.secret_file is required when peers are configured");
        r.config.replication.secret = secret_from("replication.secret_file", r.path_of(r.secret_file));
        if (r.config.replication.secret.size() < 16)
            throw ConfigError("replication.secret_file must hold a secret of at least 16 characters");
    }
}

}  // namespace

void apply_listen(Config& config, const std::string& address) {
    try {
        auto listen = net::parse_listen_address(address);
        config.server.host = listen.host;
        config.server.port = static_cast<std::uint16_t>(std::stoul(listen.port));
        if (config.proxy.runtime) config.proxy.runtime->mirror = agent_mirror_url(config.server);
    } catch (const std::invalid_argument& error) {
        throw ConfigError(std::string("listen: ") + error.what());
    }
}

Config parse_config(const std::string& text, const std::filesystem::path& base) {
    json doc = oci::parse_json(text);
    if (doc.is_discarded()) throw ConfigError("the configuration is not valid JSON");
    Config config;
    Reading r{config, base, "", "quorum"};
    Section top(doc, "");
    std::string listen, root;
    top.string("listen", listen, false);
    if (!listen.empty()) apply_listen(config, listen);
    top.string("root", root, false);
    if (!root.empty()) config.root = root;
    top.string("replica_id", config.replica_id);
    top.boolean("deletes", config.registry.deletes_enabled);
    top.strings("sparse_manifests", config.registry.sparse_manifests);
    check_repository_globs("sparse_manifests", config.registry.sparse_manifests);
    if (auto* list = top.array("quotas")) read_quotas(*list, r);
    if (auto* list = top.array("policies")) read_policies(*list, r);
    top.seconds("shutdown_grace_seconds", config.server.shutdown_grace);
    top.section("threads", [&](Section& s) {
        s.number("io", config.server.io_threads, 256);
        s.number("workers", config.server.worker_threads, 1024);
    });
    top.section("limits", [&](Section& s) { read_limits(s, r); });
    top.section("uploads", [&](Section& s) {
        s.seconds("idle_ttl_seconds", config.registry.upload_idle_ttl);
        s.seconds("purge_interval_seconds", config.upload_purge_interval);
    });
    top.section("log", [&](Section& s) { s.boolean("access", config.server.access_log); });
    top.section("tcp", [&](Section& s) { read_tcp(s, r); });
    top.section("gc", [&](Section& s) {
        s.seconds("interval_seconds", config.gc_interval);
        s.seconds("grace_seconds", config.gc.grace);
        s.boolean("delete_untagged", config.gc.delete_untagged);
        s.seconds("untagged_age_seconds", config.gc.untagged_age);
    });
    config.registry.gc_grace = config.gc.grace;
    top.section("retention", [&](Section& s) {
        s.seconds("interval_seconds", config.retention.interval);
        auto* list = s.array("policies");
        for (std::size_t i = 0; list && i < list->size(); ++i)
            config.retention.policies.push_back(
                retention_policy((*list)[i], "retention.policies[" + std::to_string(i) + "]"));
    });
    top.section("scrub", [&](Section& s) {
        s.seconds("interval_seconds", config.scrub_interval);
        s.number("rate_mib_per_second", config.scrub_rate_mib, 100000);
    });
    top.section("replication", [&](Section& s) { read_replication(s, r); });
    top.section("tls", [&](Section& s) { read_tls(s, r); });
    top.section("auth", [&](Section& s) { read_auth(s, r); });
    top.section("proxy", [&](Section& s) {
        auto* list = s.array("upstreams");
        for (std::size_t i = 0; list && i < list->size(); ++i) {
            const auto where = "proxy.upstreams[" + std::to_string(i) + "]";
            Section u((*list)[i], where);
            read_upstream(u, where, r);
        }
    });
    top.section("agent", [&](Section& s) { read_agent(s, r); });
    top.section("backup", [&](Section& s) { read_backup(s, r); });
    top.section("storage", [&](Section& s) { read_storage(s, r); });
    top.section("ui", [&](Section& s) { read_ui(s, r); });
    top.section("notifications", [&](Section& s) { read_notifications(s, r); });
    top.section("cache", [&](Section& s) {
        s.number("max_bytes", config.proxy.cache_max_bytes, UINT64_MAX);
        s.number("memory_bytes", config.metadata_cache_bytes, std::uint64_t(1) << 40);
    });
    check_combinations(r);
    top.finish();
    if (config.server.max_header_bytes < 1024) throw ConfigError("limits.max_header_bytes must be at least 1024");
    if (config.upload_purge_interval.count() == 0)
        throw ConfigError("uploads.purge_interval_seconds must be at least 1");
    return config;
}

Config load_config(const std::filesystem::path& file) {
    std::ifstream in(file);
    if (!in) throw ConfigError("cannot read configuration file " + file.string());
    std::stringstream text;
    text << in.rdbuf();
    try {
        auto config = parse_config(text.str(), file.parent_path());
        config.file = std::filesystem::absolute(file);
        return config;
    } catch (const ConfigError& error) {
        throw ConfigError(file.string() + ": " + error.what());
    }
}

}  // namespace berth::config
