#pragma once
// The operations of the distribution spec as plain C++ calls. Untrusted
// strings (names, references, digests) come in raw and are validated here;
// failures are thrown as oci::Error with the spec's code.
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "berth/oci/digest.hpp"
#include "berth/registry/contents.hpp"
#include "berth/registry/lineage.hpp"
#include "berth/registry/options.hpp"
#include "berth/registry/peers.hpp"
#include "berth/registry/quotas.hpp"
#include "berth/registry/upstreams.hpp"
#include "berth/registry/would_block.hpp"

#include "berth/storage/blob_store.hpp"
#include "berth/storage/hybrid_clock.hpp"
#include "berth/storage/meta_store.hpp"
#include "berth/storage/records.hpp"
#include "berth/storage/upload_appender.hpp"
#include "berth/observe/metrics.hpp"

namespace berth::storage {
class BlobStore;
class MetaStore;
class PullTimes;
}  // namespace berth::storage

namespace berth::registry {

class UploadTable;

struct BlobInfo {
    oci::Digest digest;
    std::uint64_t size;
    Cache cache = Cache::none;
};

struct BlobRead {
    storage::OpenBlob blob;
    Cache cache = Cache::none;
};

struct Manifest {
    oci::Digest digest;
    std::string media_type;
    std::string bytes;
    Cache cache = Cache::none;
};

struct PutManifestResult {
    oci::Digest digest;
    std::string subject;            // digest of the subject, when the manifest has one
    std::vector<std::string> tags;  // tags now pointing at it
};

struct UploadStatus {
    std::string id;
    std::uint64_t offset;
};

// A mount either links the blob (mounted) or starts a session for the client to upload.
struct MountResult {
    std::optional<oci::Digest> mounted;
    std::string upload_id;
};

struct Page {
    std::vector<std::string> items;
    bool more = false;
};

struct UsagePage {
    std::vector<NamespaceReport> items;
    bool more = false;
};

// What a registry works with besides its own store; each may be absent.
struct Collaborators {
    // Content missing here is fetched from them on read, and manifest writes
    // wait for the configured write quorum. None: a single registry.
    Peers* peers = nullptr;
    // Repositories named after an upstream's host mirror it. None: no proxying.
    Upstreams* upstreams = nullptr;
    // A client's manifest GET or HEAD notes when the tag or digest it named
    // was pulled, for retention. None: pulls are not noted.
    storage::PullTimes* pulls = nullptr;
    // Whether manifests are signed, for policies that require it. None: such a policy refuses
    // every read it guards.
    SignatureCheck* signatures = nullptr;
};

class Registry : private FetchIntake {
public:
    // wall gives milliseconds for upload idle times and pull times; tests pass their own.
    Registry(Options options, storage::BlobStore& blobs, storage::MetaStore& meta, storage::HybridClock& clock,
             Collaborators with = {}, storage::HybridClock::WallClock wall = storage::system_wall_clock());
    ~Registry() override;

    const Options& options() const { return options_; }
    // The outside party blob bytes live with ("" for the replica's own disk): BlobStore::party.
    std::string blob_party() const;

    // The repository a request names: its name, or HOST/NAME when it came
    // with ns=HOST (throws NAME_INVALID for a malformed ns, NAME_UNKNOWN for
    // a host with a port, which no repository name can hold). A read of a
    // name that is neither mirrored nor stored here goes to the default
    // upstream, as a plain pull-through mirror.
    std::string repository_of(const std::string& name, const std::optional<std::string>& ns, bool read);

    // Blobs
    BlobInfo stat_blob(const std::string& repo, const std::string& digest, Asker asker = Asker::client);
    BlobRead open_blob(const std::string& repo, const std::string& digest, Asker asker = Asker::client);
    // Where a client may fetch the blob itself (BlobStore::redirect) once repo is known to hold it
    // (stat_blob's checks); nullopt: serve it.
    std::optional<std::string> blob_redirect(const std::string& repo, const std::string& digest);
    void delete_blob(const std::string& repo, const std::string& digest);

    // Uploads
    // client names who asks (a user, or an address) for the per-client session limit.
    UploadStatus start_upload(const std::string& repo, const std::string& algorithm = "",
                              const std::string& client = "");
    MountResult mount_blob(const std::string& repo, const std::string& digest, const std::string& from,
                           const std::string& client = "");
    // may_block false (an I/O thread): throws WouldBlock rather than rebuild the session's digest
    // state from every byte it holds (after a restart or a failed write).
    UploadStatus upload_status(const std::string& repo, const std::string& id, bool may_block = true);
    // Links a blob the store holds into repo (an import writing the store directly); false when
    // the store does not hold it.
    bool link_blob(const std::string& repo, const oci::Digest& digest);
    // Exclusive access to append; `start` (from Content-Range) must equal the current offset.
    // may_block: as for upload_status. A new session's file is made by the appender off the I/O
    // threads, where its first bytes are stored (a create may wait on the file system's journal).
    std::unique_ptr<storage::UploadAppender> append(const std::string& repo, const std::string& id,
                                                    std::optional<std::uint64_t> start, bool may_block = true);
    // Verifies the digest, makes the blob durable and visible, and ends the session.
    oci::Digest finish_upload(const std::string& repo, const std::string& id, const std::string& digest);
    // Ends a session even while a request still holds it (a DELETE wins over a stalled PATCH).
    void cancel_upload(const std::string& repo, const std::string& id);
    // After an acknowledged append: records the session so that it survives a restart (a
    // session with no bytes acknowledged is not worth a write). False when the session is gone
    // (a DELETE may have ended it under a running append).
    bool keep_upload(const std::string& repo, const std::string& id);
    // Drops sessions idle for longer than the configured time; returns how many.
    std::size_t purge_idle_uploads();
    std::size_t uploads_in_progress() const;
    storage::LogStats change_log() const;
    // Memory held by the receive buffers of uploads being appended to.
    std::size_t upload_buffer_bytes() const;
    // Waits until no upload's piece is being written or hashed: a server drains them, with the
    // callbacks into its requests they run, before it goes.
    void drain_uploads();

    // Manifests
    PutManifestResult put_manifest(const std::string& repo, const std::string& reference,
                                   const std::string& content_type, std::string body,
                                   const std::vector<std::string>& extra_tags = {}, const std::string& principal = {});
    Manifest get_manifest(const std::string& repo, const std::string& reference, Asker asker = Asker::client);
    // principal: who asks, for the change log's events ("" for anonymous).
    void delete_manifest(const std::string& repo, const std::string& reference, const std::string& principal = {});

    // Discovery
    Page list_tags(const std::string& repo, std::optional<std::size_t> n, const std::string& last);
    Page catalog(std::optional<std::size_t> n, const std::string& last);
    // An OCI image index of the manifests whose subject is digest.
    std::string referrers(const std::string& repo, const std::string& digest, const std::string& artifact_type);

    // Whether reads of repo's manifests are judged by a require_signature policy: such reads are
    // planned off the I/O threads (judging may read and verify signatures).
    bool signatures_required(const std::string& repo) const;
    // An attachment no runtime can run, which the policies exempt (attachments.cpp): by what the
    // manifest and its layers are, never by a tag or a field the pusher chose.
    bool attachment(const oci::Digest& digest, const oci::ParsedManifest& parsed) const;
    bool attachment(const Manifest& manifest) const;

    // What this replica holds, for readers that look but never fetch (the web UI).
    Contents contents() const;

    // What is built on a base (lineage.hpp), over this replica's index.
    Lineage lineage(const LineageQuery& query) const { return registry::lineage(meta_, query); }

    // Usage and quotas (usage.cpp, quotas.cpp)
    // Namespaces holding anything, in name order after `last`, at most n
    // (clamped like the catalog), with their usage and rule.
    UsagePage usage(std::optional<std::size_t> n, const std::string& last) const;
    // Whether `test` holds for one of namespace ns's repositories (stops at the first).
    bool any_repository(const std::string& ns, const std::function<bool(const std::string& repo)>& test) const;
    // Prometheus text: usage and limits of the namespaces a quota rule
    // matches (bounded by the rules, not by every name pushed), and refusals.
    // Upload sessions, the change log and namespace usage under quotas.
    void write_metrics(observe::MetricsWriter& out) const;

private:
    // How a write waits for the other replicas: a client's push until the write quorum holds it;
    // a mirror fill, stored here, lets unreachable replicas catch up from the log.
    enum class Quorum { wait, best_effort };
    struct Admission {
        const std::string& repo;
        const oci::Digest& digest;
        const oci::ParsedManifest& parsed;
        const std::vector<std::string>& tags;
        Quorum quorum;
        std::string principal = {};  // who pushed it
    };
    // The one way a manifest enters the store (a push, an import, a mirror fill): approved bases,
    // immutable tags and quotas, then the manifest and its tags in one batch, replicated.
    // under_lock adds to the batch under the write lock.
    void admit_manifest(const Admission& what, std::string bytes,
                        const std::function<void(storage::MetaStore::Batch&, const storage::Stamp&)>& under_lock = {});
    // FetchIntake: blobs a mirror fetches, under the quotas a push meets.
    void admit(const std::string& repo, const oci::Digest& digest, std::uint64_t size) override;
    void link_fetched(const std::vector<std::string>& repos, const oci::Digest& digest) override;
    storage::Stamp stamp();
    bool has_blob(const std::string& repo, const oci::Digest& digest);
    Lookup find_blob(const std::string& repo, const oci::Digest& digest);
    // Commits under the write lock with fresh stamps, then waits for the write quorum.
    void commit_replicated(std::unique_lock<std::mutex>& lock, storage::MetaStore::Batch& batch);
    // get_manifest without noting the pull.
    Manifest find_manifest(const std::string& repo, const std::string& reference, Asker asker);
    // Whether a quota rule applies to repo's namespace.
    bool has_quota(const std::string& repo) const;
    // Throws DENIED, and counts it, when committing batch would exceed a
    // quota. The caller holds the write lock from before this to the commit,
    // so that two pushes at the limit cannot both pass.
    void enforce_quotas(const storage::MetaStore::Batch& batch);
    // policy_checks.cpp: every rule of the policy over a repository, at each point a manifest
    // passes (registry/policies.hpp); a rule refuses by throwing.
    enum class PolicyPoint { before_write, claim, under_write_lock };
    void enforce(PolicyPoint point, const Entry& entry);
    // The quotas a push would meet under the lock, asked before peers promise its tags.
    void precheck_quotas(const Admission& what, const std::string& bytes);
    void enforce(const ManifestRead& read);
    void enforce(const Removal& removal);
    // A mirrored repository's signature (the upstream's .sig tag and its payloads), stored here
    // like any mirrored content before the manifest is judged.
    void fetch_mirrored_signature(const std::string& repo, const oci::Digest& digest, Asker asker);
    // Mirrored repositories (mirror.cpp).
    Manifest get_mirrored_manifest(const std::string& repo, const std::string& reference, Asker asker);
    void store_mirrored_manifest(const std::string& repo, const std::string& reference,
                                 const UpstreamManifest& fetched);
    std::optional<BlobRead> open_mirrored_blob(const std::string& repo, const oci::Digest& digest, Asker asker);

    Options options_;
    storage::BlobStore& blobs_;
    storage::MetaStore& meta_;
    storage::HybridClock& clock_;
    std::unique_ptr<UploadTable> uploads_;
    Peers* const peers_;
    Upstreams* const upstreams_;
    storage::PullTimes* const pulls_;
    SignatureCheck* const signatures_;
    struct PolicyMemory;
    std::unique_ptr<PolicyMemory> policy_memory_;
    // What the rules work with (policy_checks.cpp), kept behind a pointer to a type defined there.
    struct Enforcement;
    struct PolicyGate {
        explicit PolicyGate(Registry& registry);
        ~PolicyGate();
        std::unique_ptr<Enforcement> enforcement;
    } gate_{*this};
    std::atomic<std::uint64_t> denied_bytes_{0}, denied_repositories_{0};
};

}  // namespace berth::registry
