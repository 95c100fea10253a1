// A workload run before its clock starts: blob content and digests, connections, config
// blobs, the images pulls read, the manifest and tags the manifest and tags-list ops read.
#include <algorithm>
#include <cstdio>
#include <random>

#include "manifests.hpp"
#include "run.hpp"
#include "workloads.hpp"

namespace berth::bench {

namespace {

std::uint64_t random_seed() {
    std::random_device rd;
    return (static_cast<std::uint64_t>(rd()) << 32) ^ rd() ^
           static_cast<std::uint64_t>(Clock::now().time_since_epoch().count());
}

// 8 hex digits naming the run's repositories (bench-<runid>/...).
std::string run_id(std::uint64_t seed) {
    char runid[16];
    std::snprintf(runid, sizeof runid, "%08llx",
                  static_cast<unsigned long long>(SplitMix{seed}.next() & 0xffffffffull));
    return runid;
}

}  // namespace

int run_workload(const Options& o, const Endpoint& ep, SSL_CTX* tls) { return Run(o, ep, tls).run(); }

Run::Run(const Options& o, const Endpoint& ep, SSL_CTX* tls)
    : o_(o), ep_(ep), tls_(tls), w_(o.workload), is_push_(w_.rfind("push-", 0) == 0), is_pull_(w_ == "pull"),
      is_mixed_(w_ == "mixed"), is_manifest_(w_ == "manifest-get" || w_ == "manifest-head"),
      is_tags_(w_ == "tags-list"), moves_blobs_(is_push_ || is_pull_ || is_mixed_), seed_(random_seed()),
      runid_(run_id(seed_)), base_("bench-" + runid_), shared_repo_(base_ + "/shared"), worker_repo_(o.concurrency),
      results_(o.concurrency) {}

int Run::run() {
    prepare_content();
    for (int i = 0; i < o_.concurrency; ++i) clients_.push_back(std::make_unique<Client>(ep_, o_, tls_, counters_));
    config_json_ = make_config("bench", runid_);
    config_digest_ = sha256_digest(config_json_.data(), config_json_.size());
    if (is_push_ || is_mixed_)
        push_manifest_ = JsonTemplate(manifest_json(config_digest_, config_json_.size(),
                                                    std::string(JsonTemplate::kPlaceholder), blobs_->size()));
    try {
        setup();
    } catch (const std::exception& e) {
        report_setup_error(o_, e);
        return 1;
    }
    if (o_.setup_only) {
        report_setup_only(shared_repo_, images_.empty() ? "" : images_[0].tag);
        return 0;
    }
    const RunOutcome outcome = timed();
    report_run(o_, counters_, outcome);
    return counters_.total() ? 3 : 0;
}

// Content for every blob, digests included, before the clock starts.
void Run::prepare_content() {
    if (moves_blobs_ || is_manifest_ || is_tags_) {
        std::uint64_t sz = moves_blobs_ ? o_.size : std::min<std::uint64_t>(o_.size, 4096);
        blobs_ = std::make_unique<BlobSet>(sz, seed_);
    }
    if (is_push_ || is_mixed_) {
        if (o_.ops) planned_ = o_.ops;
        else {
            double bound = o_.seconds * (8.0 * GiB) / static_cast<double>(o_.size) + 1000;
            planned_ = static_cast<std::uint64_t>(std::min(bound, 2e6));
        }
        plan_.reserve(planned_);
        for (std::uint64_t i = 0; i < planned_; ++i) plan_.push_back(blobs_->make());
    }
}

void Run::push_config(Client& c, const std::string& repo) {
    c.upload_monolithic(repo, config_digest_, {iovec{config_json_.data(), config_json_.size()}}, config_json_.size());
}

// Connections, config blobs, images to pull, manifests to get, tags to list.
void Run::setup() {
    for (int i = 0; i < o_.concurrency; ++i) {
        clients_[i]->conn().connect();
        if (is_push_ || is_mixed_) {
            worker_repo_[i] = base_ + "/w" + std::to_string(i);
            push_config(*clients_[i], worker_repo_[i]);
        }
    }
    Client& c0 = *clients_[0];
    if (is_pull_ || is_mixed_ || is_manifest_ || is_tags_) push_config(c0, shared_repo_);
    if (is_pull_ || is_mixed_) setup_images(c0);
    if (is_manifest_ || is_tags_) setup_manifest(c0);
    // --reconnect: every timed op opens its own connection. The setup's are closed
    // once each has made a request, so that over TLS its session has arrived.
    if (o_.reconnect)
        for (auto& c : clients_) {
            c->api_version_check();
            c->conn().end();
        }
}

// The images pulls read, each blob read once.
void Run::setup_images(Client& c0) {
    int n = o_.images;
    if (n <= 0) n = static_cast<int>(std::clamp<std::uint64_t>((256 * MiB + o_.size - 1) / o_.size, 1, 32));
    for (int k = 0; k < n; ++k) {
        Blob b = blobs_->make();
        c0.upload_monolithic(shared_repo_, b.digest, blobs_->range(b, 0, blobs_->size()), blobs_->size());
        Image img{shared_repo_, "pull-" + std::to_string(k), b.digest, blobs_->size(),
                  make_manifest(config_digest_, config_json_.size(), b.digest, blobs_->size())};
        c0.put_manifest(shared_repo_, img.tag, img.manifest);
        images_.push_back(img);
    }
    // Each blob is read once before the clock starts, so pulls measure serving and not the
    // disk: berth's uploads bypass the page cache, Distribution's go through it.
    for (const auto& img : images_) c0.get_blob(img.repo, img.blob_digest, img.blob_size);
}

// The manifest "latest" (and for tags-list, --tags - 1 more tags of it).
void Run::setup_manifest(Client& c0) {
    Blob b = blobs_->make();
    c0.upload_monolithic(shared_repo_, b.digest, blobs_->range(b, 0, blobs_->size()), blobs_->size());
    std::string m = make_manifest(config_digest_, config_json_.size(), b.digest, blobs_->size());
    c0.put_manifest(shared_repo_, "latest", m);
    if (is_tags_)
        for (int t = 1; t < o_.tags; ++t) c0.put_manifest(shared_repo_, "tag-" + std::to_string(t), m);
    images_.push_back(Image{shared_repo_, "latest", b.digest, blobs_->size(), m});
}

}  // namespace berth::bench
