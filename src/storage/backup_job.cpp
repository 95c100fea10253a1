// A running replica's backups (storage/backup.hpp's BackupJob).
#include <nlohmann/json.hpp>

#include "berth/observe/log.hpp"
#include "berth/observe/metrics.hpp"
#include "berth/storage/backup.hpp"

namespace berth::storage {

namespace {

std::uint64_t unix_seconds() {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

}  // namespace

BackupJob::BackupJob(BackupOptions options, const MetaStore& meta, const BlobStore& blobs)
    : options_(std::move(options)), meta_(meta), blobs_(blobs) {}

BackupJob::~BackupJob() {
    if (thread_.joinable()) thread_.join();
}

bool BackupJob::start() {
    std::lock_guard lock(mutex_);
    if (running_) return false;
    if (thread_.joinable()) thread_.join();  // the last one has ended: running_ says so
    running_ = true;
    state_ = "running";
    error_.clear();
    progress_ = {};
    started_ = unix_seconds();
    finished_ = 0;
    thread_ = std::thread([this] { run(); });
    return true;
}

void BackupJob::run() {
    BackupReport report;
    std::string error;
    try {
        report = take_backup(meta_, blobs_, options_.target, !backup_ids(options_.target).empty(),
                             [this](const BackupProgress& progress) {
                                 std::lock_guard lock(mutex_);
                                 progress_ = progress;
                             });
        if (options_.keep) prune_backups(options_.target, options_.keep);
        observe::log("info", "backup taken",
                     {{"id", report.id},
                      {"blobs", report.blobs},
                      {"copied", report.copied},
                      {"copied_bytes", report.copied_bytes},
                      {"damaged", report.damaged}});
    } catch (const std::exception& e) {
        error = e.what();
        observe::log("error", "backup failed", {{"error", error}});
    }
    std::lock_guard lock(mutex_);
    running_ = false;
    finished_ = unix_seconds();
    if (error.empty()) {
        state_ = "succeeded";
        last_ = report;
        last_success_ = finished_;
        ++succeeded_;
    } else {
        state_ = "failed";
        error_ = error;
        ++failed_;
    }
}

BackupStatus BackupJob::status() const {
    std::lock_guard lock(mutex_);
    const bool running = running_;
    return {state_,
            last_.id,
            running ? progress_.stage : std::string(),
            running ? progress_.blobs : last_.blobs,
            running ? progress_.bytes : last_.bytes,
            last_.copied,
            last_.copied_bytes,
            last_.damaged,
            started_,
            finished_,
            last_success_,
            error_};
}

void BackupJob::write_metrics(observe::MetricsWriter& out) const {
    std::lock_guard lock(mutex_);
    out.add(observe::Metric::backups_total, {{"result", "succeeded"}}, static_cast<double>(succeeded_));
    out.add(observe::Metric::backups_total, {{"result", "failed"}}, static_cast<double>(failed_));
    out.add(observe::Metric::backup_last_success_timestamp_seconds, static_cast<double>(last_success_));
    out.add(observe::Metric::backup_running, running_ ? 1 : 0);
}

}  // namespace berth::storage
