#pragma once
// One run of a push, pull, mixed, manifest or tags-list workload. Every blob's content
// and digest is prepared before the clock starts (blobs.hpp), and so is what the timed
// ops read: config blobs, images to pull, a manifest to get, tags to list.
#include <openssl/ssl.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "blobs.hpp"
#include "endpoint.hpp"
#include "manifests.hpp"
#include "options.hpp"
#include "registry_client.hpp"
#include "report.hpp"
#include "stats.hpp"

namespace berth::bench {

class Run {
public:
    Run(const Options& o, const Endpoint& ep, SSL_CTX* tls);
    // The setup, then (unless --setup-only) the timed part and its report; the exit code.
    int run();

private:
    // run_setup.cpp: before the clock.
    void prepare_content();
    void setup();
    void push_config(Client& c, const std::string& repo);
    void setup_images(Client& c0);
    void setup_manifest(Client& c0);

    // run_timed.cpp: the clock runs.
    struct WorkerState {
        std::uint64_t tagno = 0;    // push: the worker's next tag
        std::string verified_tags;  // tags-list: the last answer that passed
    };
    RunOutcome timed();
    void worker(int id, Clock::time_point deadline);
    std::uint64_t op(Client& c, int id, std::uint64_t i, bool push_op, WorkerState& state);
    std::uint64_t push(Client& c, const std::string& repo, const Blob& b, std::uint64_t& tagno);
    std::uint64_t pull(Client& c, const Image& img);
    std::uint64_t list_tags(Client& c, std::string& verified);
    RunOutcome collect(Clock::time_point start, Clock::time_point end, const ServerUsage& server);

    const Options& o_;
    const Endpoint& ep_;
    SSL_CTX* tls_;
    const std::string& w_;  // the workload's name
    const bool is_push_, is_pull_, is_mixed_, is_manifest_, is_tags_, moves_blobs_;
    std::uint64_t seed_ = 0;
    std::string runid_, base_, shared_repo_;
    Counters counters_;

    std::unique_ptr<BlobSet> blobs_;
    std::vector<Blob> plan_;  // pushed during the run, indexed by op number
    std::uint64_t planned_ = 0;
    std::vector<std::unique_ptr<Client>> clients_;
    std::string config_json_, config_digest_;
    JsonTemplate push_manifest_;            // push: the manifest of a pushed blob, its digest left out
    std::vector<std::string> worker_repo_;  // push: each worker's own repository
    std::vector<Image> images_;

    std::atomic<std::uint64_t> next_op_{0};
    std::atomic<bool> plan_exhausted_{false};
    std::vector<WorkerResult> results_;
};

}  // namespace berth::bench
