#include "agent_duties.hpp"

#include <sys/utsname.h>

#include <algorithm>
#include <condition_variable>
#include <thread>
#include <nlohmann/json.hpp>

#include "berth/net/host_port.hpp"
#include "berth/oci/json.hpp"
#include "berth/oci/manifest.hpp"
#include "berth/oci/names.hpp"
#include "berth/observe/log.hpp"
#include "berth/storage/filling_blob.hpp"

namespace berth::node {
namespace {

// An index inside an index inside an image: deeper is not an image a node runs.
constexpr int max_depth = 2;
// A preheat waits for live fetches at most this long before each blob.
constexpr auto yield_poll = std::chrono::milliseconds(100);
constexpr int max_yield_polls = 600;
// Pages of the event feed one round reads (the rest waits for the next round).
constexpr int max_feed_pages = 20;
constexpr std::size_t max_feed_answer = 16 << 20;

std::string node_architecture() {
    utsname name{};
    if (::uname(&name) != 0) return "amd64";
    const std::string machine = name.machine;
    if (machine == "x86_64") return "amd64";
    if (machine == "aarch64") return "arm64";
    if (machine == "armv7l") return "arm";
    return machine;  // ppc64le, s390x, riscv64 are OCI's names too
}

// Blocks until the blob is stored whole and verified (or its fetch failed).
bool wait_whole(const storage::OpenBlob& blob) {
    const auto& filling = blob.filling();
    if (!filling || blob.size() == 0) return true;
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false;
    filling->when_readable(blob.size() - 1, [&] {
        std::lock_guard lock(mutex);
        done = true;
        cv.notify_all();
    });
    std::unique_lock lock(mutex);
    // The callback runs on the fetch's thread at the latest when it ends: waiting for it keeps
    // it from touching this frame after it is gone.
    cv.wait(lock, [&] { return done; });
    return !filling->failed() && filling->readable() == blob.size();
}

// The (repository, tag) of every tag event of a repository under the globs.
std::vector<std::pair<std::string, std::string>> tag_moves(const nlohmann::json& events,
                                                           const std::vector<std::string>& globs) {
    std::vector<std::pair<std::string, std::string>> out;
    if (!events.is_array()) return out;
    for (auto& event : events) {
        // A replica's JSON, read without trusting a field's type.
        auto text = [](const nlohmann::json& object, const char* key) {
            auto it = object.find(key);
            return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
        };
        if (!event.is_object() || text(event, "type") != "io.berth.tag") continue;
        auto data = event.find("data");
        if (data == event.end() || !data->is_object()) continue;
        const auto repository = text(*data, "repository"), tag = text(*data, "tag");
        if (!oci::valid_repository_name(repository) || !oci::valid_tag(tag) || !oci::matches_any(globs, repository))
            continue;
        // By tag: the node then knows the tag too, as a pull would have left it.
        out.emplace_back(repository, tag);
    }
    return out;
}

}  // namespace

void AgentDuties::preheat() {
    std::vector<std::pair<std::string, std::string>> moved;
    for (int page = 0; page < max_feed_pages; ++page) {
        std::string path = "/_berth/v1/events?n=1000";
        if (!feed_cursor_.empty()) path += "&after=" + net::query_escape(feed_cursor_);
        auto answer = proxy_.ask_replicas(path, max_feed_answer);
        auto doc = oci::parse_json(answer.body);
        if (answer.status == 410 && doc.is_object() && doc["oldest"].is_string()) {
            feed_cursor_ = doc["oldest"].get<std::string>();  // events were missed: go on after them
            continue;
        }
        if (answer.status != 200 || !doc.is_object() || !doc["cursor"].is_string()) {
            observe::log("warning", "preheat: the replicas' event feed did not answer", {{"status", answer.status}});
            return;
        }
        if (feed_at_end_)
            for (auto& move : tag_moves(doc["events"], options_.preheat)) moved.push_back(std::move(move));
        feed_cursor_ = doc["cursor"].get<std::string>();
        const auto more = doc.find("more");
        if (more == doc.end() || !more->is_boolean() || !more->get<bool>()) {
            if (!feed_at_end_) observe::log("info", "preheat: following the replicas' event feed");
            feed_at_end_ = true;
            break;
        }
    }
    std::sort(moved.begin(), moved.end());
    moved.erase(std::unique(moved.begin(), moved.end()), moved.end());
    for (auto& [repository, tag] : moved) {
        std::unordered_set<std::string> digests;
        try {
            const bool whole = keep(repository, tag, digests, 0, true);
            if (whole) {
                ++preheated_;
                observe::log("info", "preheated", {{"repository", repository}, {"tag", tag}});
            }
        } catch (const std::exception& error) {
            observe::log("warning", "preheat failed",
                         {{"repository", repository}, {"tag", tag}, {"error", error.what()}});
        }
    }
}

AgentDuties::AgentDuties(const proxy::Options& options, registry::Registry& registry, proxy::Proxy& proxy)
    : options_(options), registry_(registry), proxy_(proxy), architecture_(node_architecture()) {}

void AgentDuties::check_runtime() {
    if (!options_.runtime) return;
    auto report = check_runtime_files(*options_.runtime, options_.runtime->host_root);
    for (auto& file : report.files)
        if (file.state != RuntimeFile::State::unchanged)
            observe::log("warning", "runtime mirror file not as agent-runtime apply writes it",
                         {{"path", file.path}, {"state", state_name(file.state)}});
    if (report.containerd != ConfigPath::no_containerd && !report.containerd_ready())
        observe::log("error", "containerd does not read the agent's hosts files: pulls bypass the agent",
                     {{"config_path", config_path_name(report.containerd)}, {"detail", report.containerd_detail}});
    std::lock_guard lock(mutex_);
    runtime_ = std::move(report);
    checked_ = true;
}

void AgentDuties::yield_to_pulls() const {
    // Live pulls first: a preheat fetches one blob at a time, and only once nothing else is.
    for (int waited = 0; proxy_.fetches_in_flight() > 0 && waited < max_yield_polls; ++waited)
        std::this_thread::sleep_for(yield_poll);
}

bool AgentDuties::hold_blob(const std::string& repo, const std::string& digest, bool yield) {
    if (yield) yield_to_pulls();
    auto read = registry_.open_blob(repo, digest);
    return wait_whole(read.blob);
}

bool AgentDuties::keep(const std::string& repo, const std::string& reference, std::unordered_set<std::string>& digests,
                       int depth, bool yield) {
    auto manifest = registry_.get_manifest(repo, reference);
    digests.insert(manifest.digest.str());
    auto parsed = oci::parse_manifest(manifest.bytes, manifest.media_type);
    bool whole = true;
    for (auto& blob : parsed.local_blobs()) {
        if (digests.count(blob.digest.str())) continue;
        if (hold_blob(repo, blob.digest.str(), yield)) digests.insert(blob.digest.str());
        else whole = false;
    }
    if (parsed.kind != oci::ManifestKind::index || depth >= max_depth) return whole;
    // Only the node's own platform: the others would fill the node's disk for nothing.
    auto index = nlohmann::json::parse(manifest.bytes, nullptr, false);
    for (std::size_t i = 0; i < parsed.manifests.size(); ++i) {
        const auto* platform = index.is_object() && index["manifests"].is_array() && i < index["manifests"].size()
                                   ? &index["manifests"][i]["platform"]
                                   : nullptr;
        auto text = [&](const char* key) {
            auto it = platform->find(key);
            return it != platform->end() && it->is_string() ? it->get<std::string>() : std::string();
        };
        // The first entry for the node's platform, as a runtime picks it.
        if (platform && platform->is_object() && text("os") == "linux" && text("architecture") == architecture_)
            return keep(repo, parsed.manifests[i].digest.str(), digests, depth + 1, yield) && whole;
    }
    return whole;
}

void AgentDuties::keep_images() {
    {
        std::lock_guard lock(mutex_);
        const auto now = std::chrono::steady_clock::now();
        if (kept_known_ && now - kept_at_ < options_.keep_interval) return;
        kept_at_ = now;
    }
    std::unordered_set<std::string> digests;
    std::size_t whole = 0;
    for (auto& image : options_.keep_images) {
        try {
            if (keep(image.repository, image.reference, digests, 0, false)) ++whole;
        } catch (const std::exception& error) {
            // The replicas out of reach (a cold start) or the image unknown: what is cached stays kept.
            observe::log("warning", "kept image not whole in the node's cache",
                         {{"image", image.repository + (image.reference.find(':') != std::string::npos ? "@" : ":") +
                                        image.reference},
                          {"error", error.what()}});
        }
    }
    std::lock_guard lock(mutex_);
    // Never shrinks while the replicas are away: an image half-known now was whole before.
    kept_.insert(digests.begin(), digests.end());
    kept_known_ = true;
    images_whole_ = whole;
}

std::optional<std::unordered_set<std::string>> AgentDuties::kept() const {
    std::lock_guard lock(mutex_);
    if (!kept_known_) return std::nullopt;
    return kept_;
}

void AgentDuties::write_metrics(observe::MetricsWriter& out) const {
    using observe::Metric;
    std::lock_guard lock(mutex_);
    if (!options_.keep_images.empty()) {
        out.add(Metric::agent_kept_images, {{"state", "whole"}}, static_cast<double>(images_whole_));
        out.add(Metric::agent_kept_images, {{"state", "incomplete"}},
                static_cast<double>(options_.keep_images.size() - images_whole_));
    }
    if (!options_.preheat.empty())
        out.add(Metric::agent_preheated_images_total, static_cast<double>(preheated_.load()));
    if (!checked_) return;
    for (auto state : {RuntimeFile::State::unchanged, RuntimeFile::State::kept, RuntimeFile::State::missing,
                       RuntimeFile::State::stale}) {
        const auto count = std::count_if(runtime_.files.begin(), runtime_.files.end(),
                                         [&](auto& file) { return file.state == state; });
        out.add(Metric::agent_runtime_files, {{"state", state_name(state)}}, static_cast<double>(count));
    }
    if (runtime_.containerd != ConfigPath::no_containerd)
        out.add(Metric::agent_containerd_config_path, {{"state", config_path_name(runtime_.containerd)}}, 1);
}

}  // namespace berth::node
