// fill-manifests: populate a registry fast. Phase 1 pushes the two blobs every manifest
// shares into the fill's first repository and mounts them into every new repository of
// this run; phase 2 PUTs the manifests, each by its own tag. Both are timed.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "fill_layout.hpp"
#include "registry_client.hpp"
#include "report.hpp"
#include "server_stats.hpp"
#include "workloads.hpp"

namespace berth::bench {

namespace {

class FillRun {
public:
    FillRun(const Options& o, const Endpoint& ep, SSL_CTX* tls)
        : o_(o), fill_(o), end_index_(o.first + o.ops),
          // Repositories whose first manifest is in this run get the blobs; earlier ones have them.
          repo_lo_((o.first + fill_.per_repo - 1) / fill_.per_repo),
          repo_hi_((end_index_ + fill_.per_repo - 1) / fill_.per_repo),  // exclusive
          source_repo_(fill_.repo_of_index(0)), next_op_(o.first), results_(o.concurrency) {
        for (int i = 0; i < o.concurrency; ++i) clients_.push_back(std::make_unique<Client>(ep, o, tls, counters_));
    }

    int run();

private:
    template <class Op>
    bool attempt(Client& c, Op&& op);
    void push_shared_blobs();
    void link_worker(int id);
    void manifest_worker(int id, Clock::time_point deadline);
    void start_progress();
    void stop_progress();
    FillOutcome outcome(Clock::time_point start, Clock::time_point blobs_done, Clock::time_point end,
                        const ServerUsage& server);

    const Options& o_;
    const FillLayout fill_;
    const std::uint64_t end_index_, repo_lo_, repo_hi_;
    const std::string source_repo_;
    Counters counters_;
    std::vector<std::unique_ptr<Client>> clients_;
    std::atomic<bool> failed_{false};
    std::atomic<std::uint64_t> mounted_{0}, uploaded_{0}, next_repo_{0}, next_op_, done_{0};
    std::vector<WorkerResult> results_;
    std::mutex progress_mu_;
    std::condition_variable progress_cv_;
    bool finished_ = false;
    std::thread progress_;
};

int FillRun::run() {
    try {
        for (auto& c : clients_) c->conn().connect();
    } catch (const std::exception& e) {
        report_setup_error(o_, e);
        return 1;
    }
    ServerMonitor server(o_.server_pid);
    const auto start = Clock::now();
    const auto deadline =
        start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.seconds));

    // Phase 1: the shared blobs, pushed once into the fill's first repository, mounted into the others.
    if (repo_lo_ == 0 && repo_hi_ > 0) push_shared_blobs();
    next_repo_ = std::max<std::uint64_t>(repo_lo_, 1);
    {
        std::vector<std::thread> threads;
        for (int i = 0; i < o_.concurrency; ++i) threads.emplace_back(&FillRun::link_worker, this, i);
        for (auto& t : threads) t.join();
    }
    const auto blobs_done = Clock::now();

    // Phase 2: the manifests, each PUT by its tag.
    start_progress();
    {
        std::vector<std::thread> threads;
        for (int i = 0; i < o_.concurrency; ++i) threads.emplace_back(&FillRun::manifest_worker, this, i, deadline);
        for (auto& t : threads) t.join();
    }
    const auto end = Clock::now();
    stop_progress();
    const ServerUsage usage = server.finish();
    report_fill(o_, counters_, outcome(start, blobs_done, end, usage));
    return counters_.total() ? 3 : 0;
}

// An op that fails is tried twice more (on a new connection) before it counts; the
// first one that still fails stops the fill, so that what was filled stays a prefix.
template <class Op>
bool FillRun::attempt(Client& c, Op&& op) {
    for (int tries = 1;; ++tries) {
        try {
            op();
            return true;
        } catch (const std::exception& e) {
            c.conn().close();
            if (tries < 3) {
                std::this_thread::sleep_for(std::chrono::milliseconds(100 * tries));
                continue;
            }
            const auto* op_error = dynamic_cast<const OpError*>(&e);
            const auto* net_error = dynamic_cast<const NetError*>(&e);
            counters_.record(op_error ? op_error->kind : net_error ? net_error->kind : Failure::connection, e.what());
            failed_ = true;
            return false;
        }
    }
}

void FillRun::push_shared_blobs() {
    Client& c = *clients_[0];
    for (const std::string* blob : {&fill_.config, &fill_.layer})
        attempt(c, [&] {
            c.upload_post(source_repo_, sha256_digest(blob->data(), blob->size()),
                          {iovec{const_cast<char*>(blob->data()), blob->size()}}, blob->size());
            ++uploaded_;
        });
}

void FillRun::link_worker(int id) {
    Client& c = *clients_[id];
    while (!failed_) {
        std::uint64_t r = next_repo_.fetch_add(1);
        if (r >= repo_hi_) break;
        const std::string repo = fill_.repo_of_index(r);
        // (A pair, not a structured binding: Clang 14 cannot capture one in a lambda.)
        for (const auto& blob :
             {std::pair{&fill_.config_digest, &fill_.config}, std::pair{&fill_.layer_digest, &fill_.layer}})
            attempt(c, [&] { ++(c.mount_blob(repo, source_repo_, *blob.first, *blob.second) ? mounted_ : uploaded_); });
    }
}

void FillRun::manifest_worker(int id, Clock::time_point deadline) {
    Client& c = *clients_[id];
    WorkerResult& res = results_[id];
    res.latencies_us.reserve(o_.ops / o_.concurrency + 16);
    while (!failed_) {
        if (o_.seconds > 0 && Clock::now() >= deadline) break;
        std::uint64_t i = next_op_.fetch_add(1);
        if (i >= end_index_) break;
        const std::string m = fill_.manifest(i);
        auto t0 = Clock::now();
        if (!attempt(c, [&] { c.put_manifest(fill_.repo(i), FillLayout::tag(i), m); })) break;
        res.latencies_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        ++res.ops;
        res.bytes += m.size();
        ++done_;
    }
}

// --progress: a line on stderr every so many seconds while the manifests go in.
void FillRun::start_progress() {
    if (o_.progress <= 0) return;
    progress_ = std::thread([this] {
        std::unique_lock lock(progress_mu_);
        auto last_t = Clock::now();
        std::uint64_t last_n = 0;
        while (!progress_cv_.wait_for(lock, std::chrono::duration<double>(o_.progress), [&] { return finished_; })) {
            auto now = Clock::now();
            std::uint64_t n = done_.load();
            std::fprintf(stderr, "  fill: %llu/%llu manifests, %.0f/s\n", static_cast<unsigned long long>(n),
                         static_cast<unsigned long long>(o_.ops), (n - last_n) / seconds_between(last_t, now));
            last_t = now;
            last_n = n;
        }
    });
}

void FillRun::stop_progress() {
    if (!progress_.joinable()) return;
    {
        std::lock_guard lock(progress_mu_);
        finished_ = true;
    }
    progress_cv_.notify_all();
    progress_.join();
}

FillOutcome FillRun::outcome(Clock::time_point start, Clock::time_point blobs_done, Clock::time_point end,
                             const ServerUsage& server) {
    FillOutcome f;
    f.prefix = fill_.prefix;
    f.per_repo = fill_.per_repo;
    f.repo_lo = repo_lo_;
    f.repo_hi = repo_hi_;
    f.mounted = mounted_;
    f.uploaded = uploaded_;
    f.totals = merge(results_);
    // Manifests filled form the prefix first .. next-1 (a failure stops every worker).
    f.next = o_.first + f.totals.ops;
    f.seconds = seconds_between(start, end);
    f.blob_seconds = seconds_between(start, blobs_done);
    f.manifest_seconds = seconds_between(blobs_done, end);
    f.server = server;
    return f;
}

}  // namespace

int run_fill(const Options& o, const Endpoint& ep, SSL_CTX* tls) { return FillRun(o, ep, tls).run(); }

}  // namespace berth::bench
