#pragma once
// berth's configuration: a JSON file, validated strictly (an unknown key or a
// wrong type stops the start), then overridden by command-line flags.
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>

#include "berth/auth/options.hpp"
#include "berth/http/server.hpp"
#include "berth/notify/options.hpp"
#include "berth/proxy/options.hpp"
#include "berth/registry/maintenance.hpp"
#include "berth/registry/options.hpp"
#include "berth/registry/retention.hpp"
#include "berth/replication/options.hpp"
#include "berth/s3/options.hpp"
#include "berth/storage/backup.hpp"
#include "berth/storage/meta_store.hpp"
#include "berth/trust/options.hpp"

namespace berth::config {

struct Config {
    std::filesystem::path file;  // the file it was read from (absolute); empty when there was none
    std::filesystem::path root = "./data";
    std::string replica_id;  // empty: remembered from the first start, or the host name
    http::ServerOptions server;
    registry::Options registry;
    replication::Options replication;
    auth::Options auth;
    proxy::Options proxy;  // upstreams, or the node agent's replicas
    std::chrono::seconds upload_purge_interval{60};
    registry::GcOptions gc;
    std::chrono::seconds gc_interval{3600};  // 0: only `berth gc`
    registry::RetentionOptions retention;
    std::chrono::seconds scrub_interval{86400};  // 0: never
    std::uint64_t scrub_rate_mib = 64;
    // cache.memory_bytes: manifests, tags and pages of tag lists kept decoded in memory.
    std::uint64_t metadata_cache_bytes = storage::MetaStore::default_cache_bytes;
    std::optional<s3::StoreOptions> s3_blobs;  // storage.blobs {"type": "s3"}; unset: the files store
    storage::BackupOptions backup;             // backups the server takes (docs/backup.md)
    notify::Options notifications;             // endpoints that hear of changes (docs/events.md)
    // The keys of the policies that require signatures (policies[].require_signature).
    std::vector<trust::SignatureRule> signature_rules;
};

class ConfigError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Relative paths inside (the peer secret file) are taken from base, the
// directory of the configuration file.
Config parse_config(const std::string& json_text, const std::filesystem::path& base = ".");
Config load_config(const std::filesystem::path& file);
// "HOST:PORT" or "[v6]:PORT" into server.host and server.port.
void apply_listen(Config& config, const std::string& address);

}  // namespace berth::config
