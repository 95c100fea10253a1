// Importing through a registry's API (--url): HEAD to skip what is there, a cross-repository mount
// of a blob this run put into another repository, otherwise one POST and one PUT with the whole
// blob streamed; PUT per manifest. Any OCI registry will do.
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "api_client.hpp"
#include "berth/oci/paths.hpp"
#include "destination.hpp"

namespace berth::transfer {

namespace {

// The digest of a file's bytes, for a blob whose name does not say it (an old docker save layer).
oci::Digest hash_range(const FileRange& file) {
    oci::Hasher hasher(oci::DigestAlgorithm::sha256);
    read_pieces(file, [&](const char* data, std::size_t n) { hasher.update(data, n); });
    return hasher.peek();
}

class ApiDestination : public Destination {
public:
    explicit ApiDestination(const Endpoint& endpoint) : api_(endpoint) {}

    bool has_blob(const std::string& repo, const oci::Digest& digest, std::uint64_t size) override {
        auto answer = api_.request("HEAD", oci::path::blob(repo, digest.str()), push_scope(repo));
        if (answer.status == 200 && answer.content_length.value_or(size) == size) return note(repo, digest);
        // Uploaded to another repository in this run (images sharing a base): a cross-repository mount.
        std::string from;
        {
            std::lock_guard lock(mutex_);
            auto it = seen_.find(digest.str());
            if (it == seen_.end() || it->second == repo) return false;
            from = it->second;
        }
        auto mounted = api_.request("POST", oci::path::uploads(repo) + "?mount=" + digest.str() + "&from=" + from,
                                    push_scope(repo) + " " + pull_scope(from));
        if (mounted.status == 201) return note(repo, digest);
        // 202: the registry started an upload instead of mounting; it is not needed.
        if (auto location = mounted.header("Location"); mounted.status == 202 && !location.empty())
            api_.request("DELETE", api_.location_path(location), push_scope(repo));
        return false;
    }

    oci::Digest put_blob(const std::string& repo, const FileRange& file, const std::optional<oci::Digest>& expected,
                         Progress& progress) override {
        const auto digest = expected ? *expected : hash_range(file);
        const auto uploads = oci::path::uploads(repo);
        auto started = api_.request("POST", uploads, push_scope(repo));
        const auto location = started.header("Location");
        if (started.status != 202 || location.empty())
            throw std::runtime_error(describe_answer("POST " + uploads, started));
        auto target = api_.location_path(location);
        target += (target.find('?') == std::string::npos ? "?" : "&") + std::string("digest=") + digest.str();
        auto stored = api_.send_file("PUT", target, push_scope(repo), {{"Content-Type", "application/octet-stream"}},
                                     file, [&](std::size_t n) { progress.bytes += n; });
        if (stored.status != 201) throw std::runtime_error(describe_answer("PUT of blob " + digest.str(), stored));
        note(repo, digest);
        return digest;
    }

    void put_manifest(const std::string& repo, const std::string& reference, const std::string& media_type,
                      const std::string& bytes) override {
        auto answer = api_.request("PUT", oci::path::manifest(repo, reference), push_scope(repo),
                                   {{"Content-Type", media_type}}, bytes);
        if (answer.status != 201) throw std::runtime_error(describe_answer("PUT " + repo + ":" + reference, answer));
    }

private:
    bool note(const std::string& repo, const oci::Digest& digest) {
        std::lock_guard lock(mutex_);
        seen_.emplace(digest.str(), repo);
        return true;
    }

    ApiClient api_;
    std::mutex mutex_;
    std::unordered_map<std::string, std::string> seen_;  // digest -> a repository that has it
};

}  // namespace

std::unique_ptr<Destination> open_api_destination(const Endpoint& endpoint) {
    return std::make_unique<ApiDestination>(endpoint);
}

std::unique_ptr<Destination> Destination::open(const Endpoint& endpoint) {
    if (!endpoint.url.empty()) return open_api_destination(endpoint);
    return open_store_destination(endpoint.root, endpoint.registry);
}

}  // namespace berth::transfer
