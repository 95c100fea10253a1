// A workload run's timed part: --concurrency worker threads, each on its own connection,
// take op numbers from one counter until --ops are taken or --seconds have passed.
#include <thread>

#include "manifests.hpp"
#include "run.hpp"
#include "server_stats.hpp"

namespace berth::bench {

RunOutcome Run::timed() {
    for (auto& c : clients_) c->conn().stats = {};  // count the timed part's connections only
    ServerMonitor server(o_.server_pid);
    const auto start = Clock::now();
    const auto deadline =
        start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.seconds));
    std::vector<std::thread> threads;
    for (int i = 0; i < o_.concurrency; ++i) threads.emplace_back(&Run::worker, this, i, deadline);
    for (auto& t : threads) t.join();
    const auto end = Clock::now();
    const ServerUsage usage = server.finish();
    return collect(start, end, usage);
}

void Run::worker(int id, Clock::time_point deadline) {
    Client& c = *clients_[id];
    WorkerResult& res = results_[id];
    res.latencies_us.reserve(o_.ops ? o_.ops / o_.concurrency + 16 : 100000);
    WorkerState state;
    for (;;) {
        if (o_.seconds > 0 && Clock::now() >= deadline) break;
        std::uint64_t i = next_op_.fetch_add(1);
        if (o_.ops && i >= o_.ops) break;
        const bool push_op = is_push_ || (is_mixed_ && i % 2 == 0);
        if (push_op && i >= plan_.size()) {
            plan_exhausted_ = true;
            break;
        }
        auto t0 = Clock::now();
        try {
            const std::uint64_t moved = op(c, id, i, push_op, state);
            auto t1 = Clock::now();
            res.latencies_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
            ++res.ops;
            res.bytes += moved;
        } catch (const OpError& e) {
            counters_.record(e.kind, e.what());
        } catch (const NetError& e) {
            counters_.record(e.kind, e.what());
            c.conn().close();
        } catch (const std::exception& e) {
            counters_.record(Failure::connection, e.what());
            c.conn().close();
        }
        if (o_.reconnect) c.conn().end();
    }
}

// Op i of the run on worker id's client; the body bytes it moved.
std::uint64_t Run::op(Client& c, int id, std::uint64_t i, bool push_op, WorkerState& state) {
    if (push_op) return push(c, worker_repo_[id], plan_[i], state.tagno);
    if (is_pull_ || is_mixed_) return pull(c, images_[(i / (is_mixed_ ? 2 : 1) + id) % images_.size()]);
    if (w_ == "manifest-get") {
        std::string m = c.get_manifest(images_[0].repo, images_[0].tag);
        if (m.empty()) throw OpError(Failure::verify, "empty manifest");
        return m.size();
    }
    if (w_ == "manifest-head") {
        c.head_manifest(images_[0].repo, images_[0].tag);
        return 0;
    }
    if (is_tags_) return list_tags(c, state.verified_tags);
    return 0;
}

// A blob upload as the workload says, then a manifest naming it under a new tag.
std::uint64_t Run::push(Client& c, const std::string& repo, const Blob& b, std::uint64_t& tagno) {
    if (w_ == "push-chunked") c.upload_chunked(repo, *blobs_, b);
    else if (w_ == "push-post") c.upload_post(repo, b.digest, blobs_->range(b, 0, blobs_->size()), blobs_->size());
    else c.upload_monolithic(repo, b.digest, blobs_->range(b, 0, blobs_->size()), blobs_->size());
    c.put_manifest(repo, "t" + std::to_string(tagno++), push_manifest_.fill(b.digest));
    return blobs_->size();
}

// GET of an image's manifest by tag, then of the blob it names, every byte counted.
std::uint64_t Run::pull(Client& c, const Image& img) {
    std::string m = c.get_manifest(img.repo, img.tag);
    // A manifest comes back as pushed (its digest is its identity): only another one is parsed.
    std::string d = m == img.manifest ? img.blob_digest : first_layer_digest(m);
    if (d != img.blob_digest)
        throw OpError(Failure::verify, "manifest names layer " + d + ", expected " + img.blob_digest);
    return c.get_blob(img.repo, d, img.blob_size);
}

// GET of the tags list, which must name "latest". The list does not change during the
// run: an answer the same as the last one that passed is not parsed again.
std::uint64_t Run::list_tags(Client& c, std::string& verified) {
    std::string body = c.tags_list(shared_repo_);
    if (body != verified) {
        if (!tags_list_has(body, "latest")) throw OpError(Failure::verify, "tags list lacks latest");
        verified = body;
    }
    return body.size();
}

RunOutcome Run::collect(Clock::time_point start, Clock::time_point end, const ServerUsage& server) {
    RunOutcome r;
    r.totals = merge(results_);
    r.elapsed = seconds_between(start, end);
    r.server = server;
    for (auto& c : clients_) {
        r.conns.connections += c->conn().stats.connections;
        r.conns.resumed += c->conn().stats.resumed;
        r.conns.full += c->conn().stats.full;
    }
    r.negotiated = clients_[0]->conn().negotiated();
    r.tls = ep_.tls;
    r.plan_exhausted = plan_exhausted_;
    r.planned = planned_;
    return r;
}

}  // namespace berth::bench
