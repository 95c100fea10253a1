#include "berth/node/node.hpp"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "berth/auth/authorizer.hpp"
#include "berth/http/agent_roster.hpp"
#include "berth/http/server.hpp"
#include "berth/net/host_port.hpp"
#include "berth/net/resolve.hpp"
#include "berth/node/scheduler.hpp"
#include "berth/notify/feed.hpp"
#include "berth/notify/notifications.hpp"
#include "berth/observe/log.hpp"
#include "berth/observe/metrics.hpp"
#include "berth/oci/encoding.hpp"
#include "berth/proxy/proxy.hpp"
#include "berth/registry/maintenance.hpp"
#include "berth/registry/registry.hpp"
#include "berth/registry/retention.hpp"
#include "berth/replication/protocol.hpp"
#include "berth/replication/replicator.hpp"
#include "berth/s3/blob_store.hpp"
#include "berth/s3/migration.hpp"
#include "berth/storage/backup.hpp"
#include "berth/storage/blob_store.hpp"
#include "berth/storage/hybrid_clock.hpp"
#include "berth/storage/layout.hpp"
#include "berth/storage/meta_store.hpp"
#include "agent_duties.hpp"
#include "berth/storage/pull_times.hpp"
#include "berth/trust/verifier.hpp"

namespace berth::node {
namespace {

using config::ConfigError;

std::string replica_id(const config::Config& config, storage::MetaStore& meta) {
    if (!config.replica_id.empty()) return replication::protocol::replica_id_from(config.replica_id);
    if (auto stored = meta.setting(storage::layout::setting::replica_id)) return *stored;
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    auto id = replication::protocol::replica_id_from(host);
    meta.put_setting(storage::layout::setting::replica_id, id);
    return id;
}

// Whatever fails here is the configuration's to fix: it exits 2 naming the key.
template <typename F>
auto as_config_error(const std::string& key, F&& make) {
    try {
        return make();
    } catch (const ConfigError&) {
        throw;
    } catch (const std::exception& error) {
        throw ConfigError(key + ": " + error.what());
    }
}

// Where blob bytes live: the files under root, or a bucket (storage.blobs).
// The first start on a bucket of a replica that kept its blobs as files: what `berth migrate
// --to-s3` did not copy (pushed since, or all of it) goes up before anything is served; then the
// files are set aside whole (never removed: renamed back, they are the files store again). A blob
// that cannot go up stops the start with every file where it was.
void finish_migration(s3::S3BlobStore& bucket, const std::filesystem::path& root) {
    observe::log("info", "copying the files store's blobs into the bucket", {});
    std::size_t logged = 0;
    auto progress = [&logged](const s3::MigrationReport& so_far) {
        const auto done = so_far.copied + so_far.present + so_far.corrupt.size() + so_far.failed.size();
        if (done < logged + 1000) return;
        logged = done;
        observe::log("info", "copying the files store's blobs into the bucket",
                     {{"done", done}, {"blobs", so_far.blobs}});
    };
    auto report = s3::move_files_into(bucket, root, {.parallel = 4, .stop = nullptr, .progress = progress});
    if (!report.failed.empty())
        throw std::runtime_error(std::to_string(report.failed.size()) +
                                 " blob files could not be copied into the bucket (the log says why); every file "
                                 "stays where it was, and the next start tries again");
    for (auto& digest : report.corrupt)
        observe::log("error", "a blob file does not match its digest: not copied into the bucket",
                     {{"digest", digest}});
    const auto aside = storage::FileBlobStore::set_aside(root);
    observe::log("info", "moved the files store's blobs into the bucket",
                 {{"blobs", report.blobs},
                  {"copied", report.copied},
                  {"already_there", report.present},
                  {"bytes_copied", report.bytes_copied},
                  {"corrupt_not_copied", report.corrupt.size()},
                  {"set_aside", aside.string()}});
}

std::unique_ptr<storage::BlobStore> open_blobs(const config::Config& config) {
    if (!config.s3_blobs) return std::make_unique<storage::FileBlobStore>(config.root);
    auto bucket = as_config_error("storage.blobs",
                                  [&] { return std::make_unique<s3::S3BlobStore>(config.root, *config.s3_blobs); });
    if (storage::FileBlobStore::holds_blobs(config.root)) finish_migration(*bucket, config.root);
    return bucket;
}

// The store made ready for the objects over it: namespace usage counted and lineage indexed (once,
// for a store an older berth wrote), and this replica's id known (returned, and kept in the registry's options).
std::string prepare_store(config::Config& config, storage::MetaStore& meta, storage::BlobStore& blobs) {
    meta.count_usage([&blobs](const std::string& digest) -> std::uint64_t {
        auto parsed = oci::Digest::parse(digest);
        return parsed ? blobs.size(*parsed).value_or(0) : 0;
    });
    meta.index_lineage();
    meta.put_setting(storage::layout::setting::config_file, config.file.string());
    config.registry.replica_id = replica_id(config, meta);
    return config.registry.replica_id;
}

// The server's options once the process may hold as many descriptors as they ask for. A lone
// replica seals paging cursors (the events feed's above all) with a key kept in its index, so they
// outlive restarts; replicas derive theirs from the cluster's secret, alike on each.
http::ServerOptions server_options(http::ServerOptions options, storage::MetaStore& meta, bool replicated) {
    as_config_error("limits.max_connections", [&] {
        http::raise_descriptor_limit(options.max_connections);
        return 0;
    });
    if (!replicated) {
        auto key = meta.setting(storage::layout::setting::cursor_key);
        if (!key || !oci::unhex(*key) || key->size() != 64) {
            key = oci::random_hex(32);
            meta.put_setting(storage::layout::setting::cursor_key, *key);
        }
        options.cursor_key = *oci::unhex(*key);
    }
    return options;
}

// The node agent's listener for fellow agents (agent.peers): mTLS with the agent's own certificate,
// fellow agents' blob and manifest reads only.
http::ServerOptions peer_listener_options(const config::Config& config) {
    const auto& peers = *config.proxy.peers;
    const auto& replicas = config.proxy.upstreams.front();
    http::ServerOptions options = config.server;
    try {
        auto listen = net::parse_listen_address(peers.listen);
        options.host = listen.host;
        options.port = peers.port;
    } catch (const std::invalid_argument& error) {
        throw ConfigError(std::string("agent.peers.listen: ") + error.what());
    }
    options.io_threads = 1;
    options.worker_threads = 8;
    options.tls_cert_file = replicas.cert_file;
    options.tls_key_file = replicas.key_file;
    options.tls_client_ca_file = peers.ca_file;
    options.tls_client_cert_required = true;
    options.agent_peer_listener = true;
    options.agent_cert_name = peers.server_name;
    options.ui.enabled = false;
    return options;
}

// The objects of one serving process, each given what it needs as it is made, in the order
// they depend on each other (and are destroyed in reverse).
class Node {
public:
    explicit Node(config::Config config);
    int run();

private:
    void schedule_storage_jobs();
    registry::GcOptions gc_options() const;
    void schedule_other_jobs();
    void write_metrics(observe::MetricsWriter& out);
    // The upstream registry a repository mirrors, "" for none: what events say of a mirror.
    std::string mirror_host(const std::string& repo) const {
        auto mirrored = proxy::mirrored_name(config_.proxy, repo);
        return mirrored ? config_.proxy.upstreams.at(mirrored->first).host : std::string();
    }

    config::Config config_;
    // The index first: its lock on the root keeps a second server from touching the blob store's
    // files (the bucket's cache is emptied when the store opens).
    storage::MetaStore meta_;
    std::unique_ptr<storage::BlobStore> blobs_;
    s3::S3BlobStore* bucket_ = nullptr;  // blobs_ when they live in a bucket
    const std::string replica_id_;
    storage::HybridClock clock_;
    storage::PullTimes pulls_;
    std::unique_ptr<storage::BackupJob> backups_;
    std::unique_ptr<replication::Replicator> replicator_;
    std::unique_ptr<proxy::Proxy> proxy_;
    std::unique_ptr<trust::Verifier> verifier_;
    registry::Registry registry_;
    registry::Retention retention_;
    registry::MaintenanceStats maintenance_;
    std::unique_ptr<auth::Authorizer> authorizer_;
    std::unique_ptr<notify::Notifications> notifications_;
    std::unique_ptr<AgentDuties> agent_;  // the node agent's runtime check and kept images
    notify::Feed feed_;
    observe::MetricsRegistry metrics_;
    http::Server server_;
    http::AgentRoster agents_;  // the replicas': node agents that told where they are
    // The node agent's listener for fellow agents (agent.peers), with metrics of its own.
    observe::MetricsRegistry peer_metrics_;
    std::unique_ptr<http::Server> peer_server_;
    Scheduler scheduler_;
    std::atomic<bool> stopping_{false};
};

Node::Node(config::Config config)
    : config_(std::move(config)), meta_(storage::layout::meta_dir(config_.root), storage::MetaStore::Mode::read_write,
                                        config_.metadata_cache_bytes),
      blobs_(open_blobs(config_)), bucket_(dynamic_cast<s3::S3BlobStore*>(blobs_.get())),
      replica_id_(prepare_store(config_, meta_, *blobs_)), clock_(storage::system_wall_clock()), pulls_(meta_),
      backups_(config_.backup.enabled() ? std::make_unique<storage::BackupJob>(config_.backup, meta_, *blobs_)
                                        : nullptr),
      replicator_(config_.replication.enabled()
                      ? std::make_unique<replication::Replicator>(
                            config_.replication, replica_id_, *blobs_, meta_, clock_, pulls_,
                            replication::ContentRules{
                                [this](const std::string& repo) { return proxy::mirrors(config_.proxy, repo); },
                                config_.registry.sparse_manifests},
                            backups_.get())
                      : nullptr),
      proxy_(config_.proxy.enabled() ? std::make_unique<proxy::Proxy>(config_.proxy,
                                                                      proxy::Limits{config_.registry.max_manifest_bytes,
                                                                                    config_.registry.max_blob_bytes,
                                                                                    config_.registry.min_free_bytes},
                                                                      *blobs_, meta_, replicator_.get())
                                     : nullptr),
      verifier_(as_config_error("policies",
                                [&] {
                                    const auto& rules = config_.signature_rules;
                                    return rules.empty() ? nullptr
                                                         : std::make_unique<trust::Verifier>(rules, meta_, *blobs_);
                                })),
      registry_(config_.registry, *blobs_, meta_, clock_, {replicator_.get(), proxy_.get(), &pulls_, verifier_.get()}),
      retention_(config_.retention, meta_, clock_, replica_id_, pulls_, {.peers = replicator_.get()}),
      authorizer_(as_config_error("auth",
                                  [&] {
                                      config_.auth.issuer_keys_dir =
                                          storage::layout::issuer_keys_dir(config_.root).string();
                                      return config_.auth.enabled() ? std::make_unique<auth::Authorizer>(config_.auth)
                                                                    : nullptr;
                                  })),
      notifications_(config_.notifications.enabled()
                         ? std::make_unique<notify::Notifications>(
                               config_.notifications, meta_, clock_, storage::layout::notifications_dir(config_.root),
                               replicator_.get(), [this](const std::string& repo) { return mirror_host(repo); },
                               replica_id_)
                         : nullptr),
      agent_(config_.proxy.agent ? std::make_unique<AgentDuties>(config_.proxy, registry_, *proxy_) : nullptr),
      feed_(
          meta_, replicator_.get(), [this](const std::string& repo) { return mirror_host(repo); },
          config_.notifications, replica_id_),
      server_(server_options(config_.server, meta_, replicator_ != nullptr),
              http::Services{registry_,
                             {authorizer_.get(), proxy_ ? proxy_->agent_access() : nullptr},
                             replicator_.get(),
                             &metrics_,
                             {backups_.get(), &retention_, notifications_.get(), &feed_,
                              config_.proxy.agent ? nullptr : &agents_}},
              metrics_),
      peer_server_(config_.proxy.peers ? std::make_unique<http::Server>(
                                             peer_listener_options(config_),
                                             http::Services{registry_, {}, nullptr, nullptr, {}}, peer_metrics_)
                                       : nullptr),
      scheduler_(metrics_) {
    as_config_error("listen: cannot listen on " + config_.server.host + ":" + std::to_string(config_.server.port), [&] {
        server_.bind();
        return 0;
    });
    if (peer_server_)
        as_config_error("agent.peers.listen: cannot listen on " + config_.proxy.peers->listen, [&] {
            peer_server_->bind();
            return 0;
        });
    metrics_.add_source([this](observe::MetricsWriter& out) { write_metrics(out); });
    server_.on_shutdown([this] { stopping_ = true; });
    schedule_storage_jobs();
    schedule_other_jobs();
}

void Node::write_metrics(observe::MetricsWriter& out) {
    registry_.write_metrics(out);
    maintenance_.write_metrics(out);
    retention_.write_metrics(out);
    if (replicator_) replicator_->write_metrics(out);
    if (proxy_) proxy_->write_metrics(out);
    if (verifier_) verifier_->write_metrics(out);
    if (authorizer_) authorizer_->write_metrics(out);
    if (backups_) backups_->write_metrics(out);
    if (notifications_) notifications_->write_metrics(out);
    if (agent_) agent_->write_metrics(out);
    if (!config_.proxy.agent) out.add(observe::Metric::agents_registered, static_cast<double>(agents_.agents().size()));
    if (bucket_) bucket_->write_metrics(out);
}

// A bucket every replica shares: one replica collects its blobs, and only those unlinked since
// before it heard every peer's links (docs/storage.md).
registry::GcOptions Node::gc_options() const {
    auto options = config_.gc;
    using namespace std::chrono;
    if (bucket_ && replicator_) {
        options.blobs_heard_until =
            replicator_->leads("gc")
                ? system_clock::time_point(milliseconds(replicator_->heard_from_every_peer_until_ms()))
                : system_clock::time_point{};
    }
    // Restored from a backup of the bucket: what is newer than the backup may be linked by an index
    // this one never saw (the cluster that went on, a restore drill beside it).
    if (auto taken = bucket_ ? meta_.setting(storage::layout::setting::bucket_backup_taken) : std::nullopt) {
        const auto backup = system_clock::time_point(seconds(std::strtoll(taken->c_str(), nullptr, 10)));
        options.blobs_heard_until = std::min(options.blobs_heard_until.value_or(backup), backup);
    }
    return options;
}

void Node::schedule_storage_jobs() {
    scheduler_.every("upload_purge", config_.upload_purge_interval, [this] {
        if (auto purged = registry_.purge_idle_uploads())
            observe::log("info", "purged idle uploads", {{"count", purged}});
    });
    if (config_.gc_interval.count())
        scheduler_.every("gc", config_.gc_interval, [this] {
            auto report = registry::collect_garbage(*blobs_, meta_, clock_, replica_id_, gc_options(), false);
            observe::log("info", "garbage collected",
                         {{"manifests", report.manifests},
                          {"links", report.links},
                          {"blobs", report.blobs},
                          {"bytes_freed", report.bytes_freed}});
            std::lock_guard lock(maintenance_.mutex);
            maintenance_.last_gc = std::move(report);
            ++maintenance_.gc_runs;
        });
    if (bucket_)
        scheduler_.every("s3_abandoned_uploads", config_.s3_blobs->sweep_interval, [this] {
            if (auto aborted = bucket_->abort_abandoned())
                observe::log("info", "aborted abandoned multipart uploads", {{"count", aborted}});
        });
    if (backups_ && config_.backup.interval.count())
        scheduler_.every("backup", config_.backup.interval, [this] { backups_->start(); });
    if (config_.scrub_interval.count())
        scheduler_.every("scrub", config_.scrub_interval, [this] {
            if (bucket_ && replicator_ && !replicator_->leads("scrub")) return;  // one replica reads the bucket
            // A lost blob comes back the way a read of it would: a peer's copy, or a mirror's
            // upstream. The agent's trimmed cache (cache.max_bytes) drops blobs on purpose: they are
            // fetched again when read, and are no loss.
            registry::ScrubRepair repair{[this](const std::string& repo, const oci::Digest& digest) {
                                             // Reads through: a peer's copy is stored before this
                                             // returns, a mirror's is on its way (scrub waits for it).
                                             registry_.stat_blob(repo, digest.str(), registry::Asker::client);
                                             return true;
                                         },
                                         [this](const std::string& repo) {
                                             return proxy_ && config_.proxy.cache_max_bytes && proxy_->mirrors(repo);
                                         }};
            auto report = registry::scrub(*blobs_, meta_, config_.scrub_rate_mib << 20, stopping_, repair);
            for (auto& corrupt : report.corrupt)
                observe::log("error", "scrub found corrupt content; blob quarantined", {{"digest", corrupt}});
            for (auto& missing : report.missing)
                observe::log("error", "scrub found a linked blob missing from the store", {{"digest", missing}});
            for (auto& repaired : report.repaired)
                observe::log("info", "scrub repaired a blob", {{"digest", repaired}});
            for (auto& lost : report.unrepaired)
                observe::log("error", "scrub could not repair a blob: no peer gave it back", {{"digest", lost}});
            std::lock_guard lock(maintenance_.mutex);
            maintenance_.corrupt_total += report.corrupt.size();
            maintenance_.missing_total += report.missing.size();
            maintenance_.repaired_total += report.repaired.size();
            maintenance_.last_scrub = std::move(report);
            ++maintenance_.scrub_runs;
        });
    // A short retention window (tests) is honoured about as closely as a long one.
    const auto window = config_.replication.log_retention.window;
    scheduler_.every("log_compaction",
                     std::clamp<std::chrono::seconds>(window / 4, std::chrono::seconds(1), std::chrono::seconds(60)),
                     [this] {
                         std::vector<std::uint64_t> readers;
                         if (notifications_) readers.push_back(notifications_->needed_from() - 1);
                         replication::compact_log(meta_, config_.replication.log_retention, replicator_.get(), readers);
                         // What a burst freed (pages of a bootstrap, large manifests, dropped cache
                         // halves) goes back to the system instead of staying in malloc's arenas.
                         malloc_trim(0);
                     });
    // Pull times gathered in memory reach the index once a minute (storage/pull_times.hpp).
    scheduler_.every("pull_times_flush", std::chrono::seconds(60), [this] { pulls_.flush(); });
}

void Node::schedule_other_jobs() {
    if (retention_.enabled() && config_.retention.interval.count())
        scheduler_.every("retention", config_.retention.interval, [this] {
            auto report = retention_.run(false, {}, std::chrono::system_clock::now(), &stopping_);
            if (report.tags_deleted || report.manifests_deleted)
                observe::log("info", "retention applied",
                             {{"repositories", report.repositories},
                              {"tags_evaluated", report.tags_evaluated},
                              {"tags_deleted", report.tags_deleted},
                              {"manifests_deleted", report.manifests_deleted},
                              {"seconds", report.seconds}});
        });
    if (agent_) {
        agent_->check_runtime();
        scheduler_.every("agent_runtime_check", std::chrono::minutes(5), [this] { agent_->check_runtime(); });
        if (config_.proxy.peers)
            scheduler_.every("agent_announce", config_.proxy.peers->announce_interval,
                             [this] { proxy_->announce_agent(); });
        if (!config_.proxy.preheat.empty())
            scheduler_.every("agent_preheat", config_.proxy.preheat_interval, [this] { agent_->preheat(); });
        // Every 10 s so that the first round comes soon after start; it works every keep_interval.
        if (!config_.proxy.keep_images.empty())
            scheduler_.every("agent_keep_images",
                             std::chrono::seconds(std::min<std::int64_t>(10, config_.proxy.keep_interval.count())),
                             [this] { agent_->keep_images(); });
    }
    if (proxy_ && config_.proxy.cache_max_bytes)
        scheduler_.every("cache_trim", std::chrono::seconds(10), [this] {
            std::unordered_set<std::string> kept;
            if (agent_ && !config_.proxy.keep_images.empty()) {
                auto known = agent_->kept();
                if (!known) return;  // not before the agent knows what it must keep
                kept = std::move(*known);
            }
            if (auto evicted = proxy_->trim_cache(kept))
                observe::log("info", "cache trimmed", {{"blobs_evicted", evicted}});
        });
    if (config_.server.tls()) scheduler_.every("tls_reload", std::chrono::seconds(5), [this] { server_.reload_tls(); });
    // The agents' certificate is renewed in place too (the mounted Secret).
    if (peer_server_)
        scheduler_.every("agent_peers_tls_reload", std::chrono::seconds(5), [this] { peer_server_->reload_tls(); });
    // Issuers rotate their keys; an unknown kid also reads them again, at most every 10 s.
    if (authorizer_ && !config_.auth.oidc.empty())
        scheduler_.every("issuer_keys", std::chrono::minutes(5), [this] { authorizer_->refresh_keys(); });
}

int Node::run() {
    observe::log("info", "starting",
                 {{"version", BERTH_VERSION}, {"root", config_.root.string()}, {"replica_id", replica_id_}});
    if (replicator_) replicator_->start();
    if (notifications_) notifications_->start();
    scheduler_.start();
    std::thread peer_listener;
    if (peer_server_) peer_listener = std::thread([this] { peer_server_->run(); });
    server_.run();
    if (peer_server_) {
        peer_server_->stop();
        peer_listener.join();
    }
    scheduler_.stop();
    if (notifications_) notifications_->stop();
    if (replicator_) replicator_->stop();
    pulls_.flush();
    return 0;
}

}  // namespace

int serve(config::Config config) {
    // Before anything is created on disk: an address we cannot listen on is a configuration error.
    if (net::resolve({config.server.host, std::to_string(config.server.port)}).empty())
        throw ConfigError("listen: cannot resolve host \"" + config.server.host + "\"");
    if (config.proxy.agent)
        config.proxy.upstreams.front().address_book = storage::layout::replica_addresses_file(config.root).string();
    return Node(std::move(config)).run();
}

}  // namespace berth::node
