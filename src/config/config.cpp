#include "berth/config/config.hpp"

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

using nlohmann::json;

// Reads the keys of one JSON object, checking each type, and refuses any key
// it was not asked for.
class Section {
public:
    Section(const json& value, std::string path) : value_(value), path_(std::move(path)) {
        if (!value_.is_object()) throw ConfigError(where("") + " must be an object");
    }

    void string(const char* key, std::string& out, bool may_be_empty = true) {
        if (auto* v = find(key)) {
            if (!v->is_string()) throw ConfigError(where(key) + " must be a string");
            if (!may_be_empty && v->get<std::string>().empty()) throw ConfigError(where(key) + " must not be empty");
            out = v->get<std::string>();
        }
    }

    void strings(const char* key, std::vector<std::string>& out) {
        if (auto* v = find(key)) {
            if (!v->is_array()) throw ConfigError(where(key) + " must be an array of strings");
            out.clear();
            for (auto& item : *v) {
                if (!item.is_string() || item.get<std::string>().empty())
                    throw ConfigError(where(key) + " must be an array of non-empty strings");
                out.push_back(item.get<std::string>());
            }
        }
    }

    void boolean(const char* key, bool& out) {
        if (auto* v = find(key)) {
            if (!v->is_boolean()) throw ConfigError(where(key) + " must be true or false");
            out = v->get<bool>();
        }
    }

    template <typename Unsigned>
    void number(const char* key, Unsigned& out, std::uint64_t max = UINT32_MAX) {
        if (auto* v = find(key)) {
            if (!v->is_number_unsigned() || v->get<std::uint64_t>() > max)
                throw ConfigError(where(key) + " must be a whole number from 0 to " + std::to_string(max));
            out = static_cast<Unsigned>(v->get<std::uint64_t>());
        }
    }

    // A number of days, fractions allowed, to the second.
    void days(const char* key, std::optional<std::chrono::seconds>& out, double max = 36500) {
        if (auto* v = find(key)) {
            if (!v->is_number() || v->get<double>() < 0 || v->get<double>() > max)
                throw ConfigError(where(key) + " must be a number of days from 0 to " + std::to_string(int(max)));
            out = std::chrono::seconds(std::llround(v->get<double>() * 86400));
        }
    }

    void seconds(const char* key, std::chrono::seconds& out) {
        std::uint64_t value = static_cast<std::uint64_t>(out.count());
        number(key, value, 365ull * 24 * 3600);
        out = std::chrono::seconds(value);
    }

    bool has(const char* key) const { return value_.contains(key); }

    const json* object(const char* key) {
        auto* v = find(key);
        if (v && !v->is_object()) throw ConfigError(where(key) + " must be an object");
        return v;
    }

    const json* array(const char* key) {
        auto* v = find(key);
        if (v && !v->is_array()) throw ConfigError(where(key) + " must be an array");
        return v;
    }

    template <typename Read>
    void section(const char* key, Read read) {
        if (auto* v = find(key)) {
            Section inner(*v, where(key));
            read(inner);
            inner.finish();
        }
    }

    void finish() const {
        for (auto& [key, unused] : value_.items())
            if (!seen_.count(key)) throw ConfigError("unknown key " + where(key.c_str()));
    }

private:
    const json* find(const char* key) {
        seen_.insert(key);
        auto it = value_.find(key);
        return it == value_.end() ? nullptr : &*it;
    }

    std::string where(const char* key) const {
        if (!*key) return path_.empty() ? "the configuration" : path_;
        return path_.empty() ? key : path_ + "." + key;
    }

    const json& value_;
    std::string path_;
    std::set<std::string> seen_;
};

void check_repository_globs(const std::string& key, const std::vector<std::string>& globs) {
    for (auto& glob : globs)
        if (glob.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789._-/*") != std::string::npos)
            throw ConfigError(key + ": \"" + glob + "\" is not a repository glob");
}

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

// A file named by the configuration must be readable now, not at the first fetch.
std::string readable_file(const std::string& key, const std::string& path) {
    std::ifstream in(path);
    if (!in) throw ConfigError(key + ": cannot read " + path);
    return path;
}

std::string secret_from(const std::string& key, const std::string& path) {
    std::ifstream in(readable_file(key, path));
    std::string secret;
    std::getline(in, secret);
    while (!secret.empty() && std::isspace(static_cast<unsigned char>(secret.back()))) secret.pop_back();
    if (secret.empty()) throw ConfigError(key + ": " + path + " is empty");
    return secret;
}

void check_url(const std::string& key, const std::string& url) {
    try {
        net::parse_url(url);
    } catch (const std::invalid_argument& error) {
        throw ConfigError(key + ": " + error.what());
    }
}

}  // namespace

void apply_listen(Config& config, const std::string& address) {
    try {
        auto listen = net::parse_listen_address(address);
        config.server.host = listen.host;
        config.server.port = static_cast<std::uint16_t>(std::stoul(listen.port));
    } catch (const std::invalid_argument& error) {
        throw ConfigError(std::string("listen: ") + error.what());
    }
}

namespace {

// What the sections share while they are read: where relative paths start, and keys checked
// only once every section has been read.
struct Reading {
    Config& config;
    std::filesystem::path base;
    std::string secret_file, quorum;  // kept for check_combinations

    std::string path_of(const std::string& file) const {
        std::filesystem::path path(file);
        return (path.is_relative() ? base / path : path).string();
    }
};

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
    s.string("ciphers", o.tls_ciphers);
    if (o.tls_cert_file.empty() != o.tls_key_file.empty()) throw ConfigError("tls needs both cert and key");
    if (!o.tls_client_ca_file.empty() && o.tls_cert_file.empty()) throw ConfigError("tls.client_ca needs cert and key");
    for (auto* file : {&o.tls_cert_file, &o.tls_key_file, &o.tls_client_ca_file})
        if (!file->empty()) *file = r.path_of(*file);
}

void read_auth_rules(const json& rules, auth::Options& a) {
    for (std::size_t i = 0; i < rules.size(); ++i) {
        Section r(rules[i], "auth.rules[" + std::to_string(i) + "]");
        auth::Rule rule;
        std::vector<std::string> actions;
        r.string("repository", rule.repository, false);
        r.strings("principals", rule.principals);
        r.strings("actions", actions);
        r.finish();
        if (rule.repository.empty() || rule.principals.empty() || actions.empty())
            throw ConfigError("auth.rules[" + std::to_string(i) + "] needs repository, principals and actions");
        for (auto& p : rule.principals)
            if (!(p == "anonymous" || p == "authenticated" || p.starts_with("user:") || p.starts_with("group:")))
                throw ConfigError("auth.rules[" + std::to_string(i) + "].principals: \"" + p +
                                  "\" is not user:NAME, group:NAME, authenticated or anonymous");
        for (auto& name : actions) {
            auto action = auth::parse_action(name);
            if (!action)
                throw ConfigError("auth.rules[" + std::to_string(i) + "].actions: \"" + name +
                                  "\" is not pull, push or delete");
            rule.actions.push_back(*action);
        }
        a.rules.push_back(std::move(rule));
    }
}

void read_auth_oidc(const json& issuers, Reading& r) {
    for (std::size_t i = 0; i < issuers.size(); ++i) {
        const auto where = "auth.oidc[" + std::to_string(i) + "]";
        Section s(issuers[i], where);
        auth::OidcIssuer issuer;
        s.string("issuer", issuer.issuer, false);
        s.strings("audiences", issuer.audiences);
        s.string("jwks_file", issuer.jwks_file, false);
        s.string("discovery_url", issuer.discovery_url, false);
        s.string("ca_file", issuer.ca_file, false);
        s.string("bearer_token_file", issuer.bearer_token_file, false);
        s.string("username_claim", issuer.username_claim, false);
        s.string("groups_claim", issuer.groups_claim, false);
        s.seconds("max_token_lifetime_seconds", issuer.max_token_lifetime);
        s.finish();
        if (issuer.issuer.empty() || issuer.audiences.empty()) throw ConfigError(where + " needs issuer and audiences");
        if (issuer.jwks_file.empty() == issuer.discovery_url.empty())
            throw ConfigError(where + " needs jwks_file or discovery_url, one of them");
        if (!issuer.discovery_url.empty()) {
            try {
                net::parse_url(issuer.discovery_url);
            } catch (const std::invalid_argument& error) {
                throw ConfigError(where + ".discovery_url: " + error.what());
            }
        }
        for (auto* file : {&issuer.jwks_file, &issuer.ca_file, &issuer.bearer_token_file})
            if (!file->empty()) *file = r.path_of(*file);
        for (auto& other : r.config.auth.oidc)
            if (other.issuer == issuer.issuer)
                throw ConfigError(where + ".issuer: \"" + issuer.issuer + "\" is listed twice");
        r.config.auth.oidc.push_back(std::move(issuer));
    }
}

void read_auth(Section& s, Reading& r) {
    auto& a = r.config.auth;
    s.string("htpasswd", a.htpasswd_file);
    if (!a.htpasswd_file.empty()) a.htpasswd_file = r.path_of(a.htpasswd_file);
    s.section("token", [&](Section& t) {
        t.string("signing_key", a.token_signing_key_file);
        if (!a.token_signing_key_file.empty()) a.token_signing_key_file = r.path_of(a.token_signing_key_file);
        t.strings("verify_keys", a.token_verify_key_files);
        for (auto& file : a.token_verify_key_files) file = r.path_of(file);
        t.string("issuer", a.token_issuer, false);
        t.string("service", a.token_service, false);
        t.string("realm", a.token_realm);
        t.seconds("ttl_seconds", a.token_ttl);
    });
    if (auto* groups = s.object("groups")) {
        for (auto& [name, members] : groups->items()) {
            if (!members.is_array()) throw ConfigError("auth.groups." + name + " must be an array of user names");
            for (auto& member : members) {
                if (!member.is_string()) throw ConfigError("auth.groups." + name + " must be an array of user names");
                a.groups[name].push_back(member.get<std::string>());
            }
        }
    }
    if (auto* rules = s.array("rules")) read_auth_rules(*rules, r.config.auth);
    if (auto* issuers = s.array("oidc")) read_auth_oidc(*issuers, r);
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
    if (replicas.urls.empty()) throw ConfigError("agent.replicas must list the replicas' URLs");
    for (std::size_t i = 0; i < replicas.urls.size(); ++i)
        check_url("agent.replicas[" + std::to_string(i) + "]", replicas.urls[i]);
    if (replicas.cert_file.empty() != replicas.key_file.empty())
        throw ConfigError("agent: cert_file and key_file go together");
    if (!replicas.cert_file.empty()) {
        replicas.cert_file = readable_file("agent.cert_file", r.path_of(replicas.cert_file));
        replicas.key_file = readable_file("agent.key_file", r.path_of(replicas.key_file));
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
        r.config.registry.pull_only = true;
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
        throw ConfigError("auth.rules need auth.htpasswd or auth.token to know who is asking");
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
        return parse_config(text.str(), file.parent_path());
    } catch (const ConfigError& error) {
        throw ConfigError(file.string() + ": " + error.what());
    }
}

}  // namespace berth::config
