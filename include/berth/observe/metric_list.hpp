#pragma once
// Every metric berth exports, declared once: M(id, type, help). Its name is
// "berth_" followed by the id; its labels are named where it is recorded.
// Dashboards and tests use these names: rename none.
#define BERTH_METRICS(M)                                                                                               \
    /* HTTP (http/request_metrics) */                                                                                  \
    M(http_requests_total, counter, "Requests answered, by route, method and status.")                                 \
    M(http_request_duration_seconds, histogram, "Time to answer, by route.")                                           \
    M(http_received_bytes_total, counter, "Request body bytes received.")                                              \
    M(http_sent_bytes_total, counter, "Response body bytes sent.")                                                     \
    M(blob_read_from_disk_bytes_total, counter,                                                                        \
      "Blob bytes a GET found outside the page cache and read in on a worker thread.")                                 \
    M(tls_kernel_sent_bytes_total, counter, "Blob bytes sent over TLS with sendfile, encrypted by the kernel (kTLS).") \
    M(tls_connections_total, counter,                                                                                  \
      "TLS connections, by who encrypts what berth sends: kernel (kTLS), berth or openssl.")                           \
    M(http_connections, gauge, "Open client connections.")                                                             \
    M(accept_backoffs_total, counter,                                                                                  \
      "Times accepting a connection failed for want of descriptors or memory and the listener paused.")                \
    M(remote_queue_refusals_total, counter,                                                                            \
      "Requests needing an upstream or peer refused because its queue was full or its deadline passed while "          \
      "queued.")                                                                                                       \
    /* periodic jobs */                                                                                                \
    M(periodic_task_runs_total, counter, "Runs of each periodic task.")                                                \
    M(periodic_task_failures_total, counter, "Runs of each periodic task that ended in an exception.")                 \
    M(periodic_task_duration_seconds, summary, "Time the runs of each periodic task took.")                            \
    /* uploads and the change log (registry) */                                                                        \
    M(uploads_in_progress, gauge, "Upload sessions open.")                                                             \
    M(upload_buffer_bytes, gauge, "Memory held by the receive buffers of uploads being appended to.")                  \
    M(changelog_entries, gauge, "Entries in the change log.")                                                          \
    M(changelog_bytes, gauge, "The change log's size (RocksDB's estimate).")                                           \
    M(changelog_oldest_entry_age_seconds, gauge, "Age of the oldest entry kept (0: none).")                            \
    M(index_memory_bytes, gauge,                                                                                       \
      "Memory the metadata index holds, by part: record_cache, memtables, block_cache, table_readers.")                \
    /* garbage collection and scrub (registry/maintenance) */                                                          \
    M(storage_blob_bytes, gauge, "Bytes of blob files kept at the last garbage collection.")                           \
    M(storage_blobs, gauge, "Blob files kept at the last garbage collection.")                                         \
    M(gc_runs_total, counter, "Garbage collections run.")                                                              \
    M(gc_last_removed_blobs, gauge, "Blob files the last collection removed.")                                         \
    M(gc_last_freed_bytes, gauge, "Bytes the last collection freed.")                                                  \
    M(scrub_runs_total, counter, "Scrub passes finished.")                                                             \
    M(scrub_last_checked_bytes, gauge, "Bytes re-hashed by the last scrub pass.")                                      \
    M(scrub_corrupt_total, counter, "Corrupt blobs and manifests found by scrubbing.")                                 \
    M(scrub_missing_total, counter, "Linked blobs scrubbing found the store without.")                                 \
    M(scrub_repaired_total, counter, "Corrupt or missing blobs scrubbing got back (a cache, a peer, an upstream).")    \
    M(scrub_unrepaired_blobs, gauge, "Corrupt or missing blobs the last scrub could not get back.")                    \
    /* notifications (notify/notifications) */                                                                         \
    M(notify_delivered_total, counter, "Events delivered to each endpoint by this replica.")                           \
    M(notify_failed_total, counter, "Deliveries to each endpoint that failed (each is retried).")                      \
    M(notify_retried_total, counter, "Deliveries to each endpoint that were attempts after a failure.")                \
    M(notify_dead_lettered_total, counter,                                                                             \
      "Events that never reached each endpoint within its max_age, or that "                                           \
      "the change log dropped before they did.")                                                                       \
    M(notify_lag_events, gauge, "Changes each endpoint has not heard of yet (counted within a window of the log).")    \
    M(notify_lag_seconds, gauge, "Age of the oldest change each endpoint has not heard of (0: none).")                 \
    M(notify_disabled, gauge, "1 while an endpoint is disabled by a 410 answer.")                                      \
    M(notify_delivering, gauge, "1 on the replica delivering for each endpoint.")                                      \
    M(notify_pulls_uncounted_total, counter, "Pulls not counted for pull events: the interval's tally was full.")      \
    M(notify_pulls_dropped_total, counter,                                                                             \
      "Pull counts an endpoint did not get: refused, older than max_age, or too many waiting for it.")                 \
    /* backups (storage/backup) */                                                                                     \
    M(backups_total, counter, "Backups the server took, by result.")                                                   \
    M(backup_last_success_timestamp_seconds, gauge, "When the last backup that succeeded ended (0: none yet).")        \
    M(backup_running, gauge, "1 while a backup is under way.")                                                         \
    /* blobs in an S3 bucket (s3/blob_store) */                                                                        \
    M(s3_objects_uploaded_total, counter,                                                                              \
      "Blobs this replica uploaded to the bucket (one PUT or one multipart upload).")                                  \
    M(s3_uploaded_bytes_total, counter, "Blob bytes this replica uploaded to the bucket.")                             \
    M(s3_multipart_uploads_total, counter, "Blobs uploaded in parts.")                                                 \
    M(s3_abandoned_uploads_aborted_total, counter,                                                                     \
      "Multipart uploads found neither completed nor aborted past storage.blobs.abandoned_upload_hours, aborted.")     \
    M(s3_blobs_renewed_total, counter, "Pushes of a blob the bucket held already: renewed, not uploaded.")             \
    M(s3_cache_requests_total, counter, "Reads of the local blob cache, by result (hit, miss).")                       \
    M(s3_cache_evictions_total, counter, "Blobs the local cache let go, least recently used first.")                   \
    M(s3_cache_bytes, gauge, "Bytes in the local blob cache, and its capacity (by kind: used, capacity).")             \
    /* replication */                                                                                                  \
    M(replication_lag_events, gauge, "Change-log events of the peer not yet applied here.")                            \
    M(replication_lag_seconds, gauge, "Age of the oldest peer event not yet applied.")                                 \
    M(replication_errors_total, counter, "Failed requests to the peer.")                                               \
    M(replication_peer_up, gauge, "Whether the last request to the peer succeeded.")                                   \
    M(replication_peer_compatible, gauge, "Whether the peer speaks a protocol version this replica does.")             \
    M(replication_fetched_bytes_total, counter, "Blob bytes copied from peers.")                                       \
    /* quotas (registry/usage) */                                                                                      \
    M(namespace_used_bytes, gauge,                                                                                     \
      "Bytes of the distinct blobs linked into a namespace's repositories (namespaces a quota rule matches).")         \
    M(namespace_repositories, gauge, "Repositories in a namespace a quota rule matches.")                              \
    M(namespace_max_bytes, gauge, "A namespace's quota of bytes.")                                                     \
    M(namespace_max_repositories, gauge, "A namespace's quota of repositories.")                                       \
    M(quota_denied_total, counter, "Pushes refused for a quota, by quota.")                                            \
    /* retention (registry/retention) */                                                                               \
    M(retention_runs_total, counter, "Retention rounds finished on this replica.")                                     \
    M(retention_deleted_total, counter, "Tags and untagged manifests retention deleted.")                              \
    M(retention_last_run_seconds, gauge, "How long the last retention round took.")                                    \
    M(retention_last_run_repositories, gauge, "Repositories the last round judged (those this replica owns).")         \
    M(retention_last_run_tags_evaluated, gauge, "Tags the last retention round judged.")                               \
    M(retention_unpulled_skipped_total, counter,                                                                       \
      "Repositories whose unpulled rule was not judged: a replica could not be asked for its pulls.")                  \
    /* authentication (auth) */                                                                                        \
    M(auth_logins_total, counter,                                                                                      \
      "Credentials checked, by method (htpasswd, token, oidc, ldap) and result (ok, refused, unavailable).")           \
    M(auth_issuer_key_refreshes_total, counter, "Reads of a trusted issuer's key set, by issuer and result.")          \
    /* the pull-through cache (proxy) */                                                                               \
    M(proxy_hits_total, counter, "Reads of mirrored repositories answered from the cache.")                            \
    M(proxy_misses_total, counter, "Reads of mirrored repositories that needed the upstream.")                         \
    M(proxy_stale_total, counter, "Reads answered from the cache while the upstream was out of reach.")                \
    M(proxy_fetched_bytes_total, counter, "Bytes fetched from the upstream.")                                          \
    M(proxy_coalesced_total, counter, "Reads that joined a fetch already under way instead of starting one.")          \
    M(proxy_upstream_errors_total, counter, "Upstream requests that failed.")                                          \
    M(proxy_upstream_seconds, summary, "Upstream requests and the time until their answers.")                          \
    M(agent_authorizations_total, counter,                                                                             \
      "The node agent's decisions who may read, by result (allowed, denied, unavailable) and whether cached.")         \
    M(agent_runtime_files, gauge,                                                                                      \
      "The runtime's mirror files agent.runtime names, by state at the last check (unchanged, kept, missing, stale).") \
    M(agent_containerd_config_path, gauge,                                                                             \
      "1 for whether containerd's config_path lets it read the agent's hosts files (set, implied, unset, elsewhere).") \
    M(agent_kept_images, gauge, "The images of agent.keep_images, whole in the node's cache or not (state).")          \
    M(agent_remembered_replicas_total, counter,                                                                        \
      "Times the agent reached the replicas by the addresses it remembered, their name having no answer.")             \
    M(agent_blob_bytes_total, counter, "Blob bytes the node agent received, by source (replicas, agents).")            \
    M(agent_peers, gauge, "Node agents this agent knows of (itself included), as the replicas list them.")             \
    M(agent_peer_failures_total, counter,                                                                              \
      "Fetches from fellow agents that failed, by reason (unreachable, refused, corrupt); the next source was asked.") \
    M(agent_preheated_images_total, counter,                                                                           \
      "Images the agent fetched whole because a tag under agent.preheat moved.")                                       \
    M(agents_registered, gauge, "Node agents that told this replica where they listen within the last 30 s.")          \
    /* policies (registry/policies.hpp, trust) */                                                                      \
    M(policy_refusals_total, counter, "Reads and writes a policy refused, by policy and reason.")                      \
    M(signature_verifications_total, counter,                                                                          \
      "Signature judgements of manifests, by result (signed, unsigned) and whether the cached one was reused.")
