// berth import and berth export (docs/airgap.md): the command lines, the progress line on a
// terminal, and the summary.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <fstream>
#include <iostream>
#include <mutex>
#include <thread>

#include "berth/config/config.hpp"
#include "berth/storage/layout.hpp"
#include "berth/storage/meta_store.hpp"
#include "berth/transfer/transfer.hpp"
#include "commands.hpp"

namespace berth::cli {

namespace {

constexpr const char* import_help =
    R"(Usage: berth import (--root DIR [--config FILE] | --url URL [--username U --password-file F] [--ca-file F]
                                                        [--token-realm URL]...)
                    SOURCE... [--repository R] [--repository-prefix P] [--parallel N]

Loads every image a SOURCE carries into a registry: an OCI image layout
directory, an oci-archive tarball, a docker save archive, or an unpacked Zarf
package (its images/ layout). Names come from each entry's full reference
(org.opencontainers.image.ref.name as skopeo writes oci:DIR:REPO:TAG, or
containerd's and Zarf's name annotations) or a docker archive's RepoTags; a
bare tag takes its repository from --repository; signatures and SBOMs go into
their subject's repository. Blobs are streamed, hashed and deduplicated:
--root writes the store directly (the server stopped, or a fresh replica; the
change log lets peers replicate it), --url goes through the registry API with
--parallel uploads (default 4); its credentials go to a token realm on --url's
own origin, or under a --token-realm URL. With --root, the server's policies (immutable
tags, approved bases), quotas and limits apply as to a push: those of --config,
else of the configuration file the server last started with. Run it again
after a crash: it does only what is missing. A corrupt or missing blob, or one
a policy or quota refuses, fails its image; the others load.
)";

constexpr const char* export_help =
    R"(Usage: berth export (--root DIR | --url URL [--username U --password-file F] [--ca-file F] [--token-realm URL]...)
                    REPOSITORY[:TAG|@DIGEST]... --to DIR|FILE.tar [--since TIME]

Writes the images, their indexes' children and their referrers (signatures,
SBOMs) as an OCI image layout into a directory or a tar archive, each named by
a full-reference ref.name annotation so berth import puts it back under its
name. --root reads the store beside a running berth. --since (with --root;
2026-11-20, 2026-11-20T08:00:00Z, or 36h / 7d ago) leaves out the blobs each
repository had before then: the update carries only new layers, and the
import finds the rest already on the other side.
)";

transfer::Endpoint endpoint_of(const Arguments& arguments) {
    transfer::Endpoint endpoint;
    endpoint.root = arguments.value("--root").value_or("");
    endpoint.url = arguments.value("--url").value_or("");
    if (endpoint.root.empty() == endpoint.url.empty()) throw UsageError("give one of --root DIR and --url URL");
    endpoint.username = arguments.value("--username").value_or("");
    endpoint.ca_file = arguments.value("--ca-file").value_or("");
    if (auto realms = arguments.values.find("--token-realm"); realms != arguments.values.end())
        endpoint.token_realms = realms->second;
    if (auto file = arguments.value("--password-file")) {
        std::ifstream in(*file);
        if (!in || !std::getline(in, endpoint.password)) throw UsageError("cannot read a password from " + *file);
    }
    return endpoint;
}

// The policies, quotas and limits the store's server applies: --config's, else those of the
// configuration file the server last started with (the store remembers it).
registry::Options server_registry_options(const Arguments& arguments, const std::filesystem::path& root) {
    auto file = arguments.value("--config");
    if (!file) {
        const auto dir = storage::layout::meta_dir(root);
        if (!std::filesystem::exists(dir)) return {};  // a new store: no server has configured it
        storage::MetaStore meta(dir, storage::MetaStore::Mode::read_only);
        auto remembered = meta.setting(storage::layout::setting::config_file);
        if (!remembered || remembered->empty()) return {};
        file = *remembered;
    }
    config::Config config;
    try {
        config = config::load_config(*file);
    } catch (const std::exception& error) {
        throw UsageError(std::string(error.what()) +
                         " (the server's policies and quotas apply to an import: give --config)");
    }
    if (config.s3_blobs)
        throw UsageError("the store keeps its blobs in a bucket (storage.blobs): import through the server (--url)");
    return config.registry;
}

// A progress line on a terminal, twice a second, while the work runs.
class ProgressLine {
public:
    ProgressLine(const transfer::Progress& progress, const char* verb) : progress_(progress), verb_(verb) {
        if (isatty(STDERR_FILENO)) thread_ = std::thread([this] { run(); });
    }
    ~ProgressLine() { stop(); }
    void stop() {
        {
            std::lock_guard lock(mutex_);
            done_ = true;
        }
        wake_.notify_all();
        if (thread_.joinable()) {
            thread_.join();
            std::cerr << "\n";
        }
    }
    double seconds() const {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    }

private:
    void run() {
        std::unique_lock lock(mutex_);
        while (!wake_.wait_for(lock, std::chrono::milliseconds(500), [&] { return done_; })) {
            const auto mib = static_cast<double>(progress_.bytes) / (1 << 20);
            std::cerr << "\r" << verb_ << " " << progress_.manifests << " manifests, " << progress_.blobs << " blobs ("
                      << static_cast<std::uint64_t>(mib) << " MiB, " << static_cast<std::uint64_t>(mib / seconds())
                      << " MiB/s), " << progress_.blobs_present << " present   " << std::flush;
        }
    }
    const transfer::Progress& progress_;
    const char* verb_;
    const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
    std::mutex mutex_;
    std::condition_variable wake_;
    bool done_ = false;
    std::thread thread_;
};

// 2026-11-20, 2026-11-20T08:00:00Z, or 36h / 7d before now.
std::chrono::system_clock::time_point parse_time(const std::string& text) {
    const auto now = std::chrono::system_clock::now();
    if (!text.empty() && (text.back() == 'h' || text.back() == 'd') &&
        text.find_first_not_of("0123456789") == text.size() - 1) {
        const auto count = std::stoll(text.substr(0, text.size() - 1));
        return now - std::chrono::hours(text.back() == 'h' ? count : 24 * count);
    }
    std::tm tm{};
    const char* end = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (!end || *end) {
        tm = {};
        end = strptime(text.c_str(), "%Y-%m-%d", &tm);
    }
    if (!end || *end) throw UsageError("--since: \"" + text + "\" is not 2026-11-20, 2026-11-20T08:00:00Z, 36h or 7d");
    return std::chrono::system_clock::from_time_t(timegm(&tm));
}

}  // namespace

int import(const std::vector<std::string>& args) {
    auto arguments = parse_arguments(args,
                                     {"--root", "--config", "--url", "--username", "--password-file", "--ca-file",
                                      "--token-realm", "--repository", "--repository-prefix", "--parallel"},
                                     {});
    if (arguments.help) {
        std::cout << import_help;
        return 0;
    }
    transfer::ImportOptions options;
    options.into = endpoint_of(arguments);
    if (!options.into.root.empty()) options.into.registry = server_registry_options(arguments, options.into.root);
    if (arguments.rest.empty()) throw UsageError("name at least one SOURCE");
    for (auto& source : arguments.rest) options.sources.emplace_back(source);
    options.repository = arguments.value("--repository").value_or("");
    options.repository_prefix = arguments.value("--repository-prefix").value_or("");
    if (auto parallel = arguments.value("--parallel")) {
        if (parallel->empty() || parallel->find_first_not_of("0123456789") != std::string::npos ||
            std::stoul(*parallel) == 0 || std::stoul(*parallel) > 64)
            throw UsageError("--parallel takes 1 to 64");
        options.parallel = static_cast<unsigned>(std::stoul(*parallel));
    }
    transfer::Progress progress;
    ProgressLine line(progress, "loaded");
    auto report = transfer::import_images(options, progress);
    line.stop();
    for (auto& loaded : report.loaded) std::cout << "loaded " << loaded << "\n";
    for (auto& failed : report.failed) std::cout << "FAILED " << failed << "\n";
    const auto mib = static_cast<double>(progress.bytes) / (1 << 20);
    std::cout << report.loaded.size() << " images (" << report.manifests << " manifests), " << progress.blobs
              << " blobs written (" << static_cast<std::uint64_t>(mib) << " MiB), " << progress.blobs_present
              << " already there, in " << line.seconds() << " s (" << static_cast<std::uint64_t>(mib / line.seconds())
              << " MiB/s)" << (report.failed.empty() ? "" : "; " + std::to_string(report.failed.size()) + " failed")
              << "\n";
    return report.failed.empty() ? 0 : 1;
}

int export_images(const std::vector<std::string>& args) {
    auto arguments = parse_arguments(
        args, {"--root", "--url", "--username", "--password-file", "--ca-file", "--token-realm", "--to", "--since"},
        {});
    if (arguments.help) {
        std::cout << export_help;
        return 0;
    }
    transfer::ExportOptions options;
    options.from = endpoint_of(arguments);
    options.to = arguments.required("--to");
    if (arguments.rest.empty()) throw UsageError("name at least one REPOSITORY[:TAG|@DIGEST]");
    options.references = arguments.rest;
    if (auto since = arguments.value("--since")) {
        if (!options.from.url.empty())
            throw UsageError("--since needs --root: a registry's API says not when it got a blob");
        options.since = parse_time(*since);
    }
    transfer::Progress progress;
    ProgressLine line(progress, "written");
    try {
        auto report = transfer::export_images(options, progress);
        line.stop();
        std::cout << "exported " << report.written.size() << " images to " << options.to.string() << ": "
                  << report.manifests << " manifests, " << report.blobs << " blobs (" << (report.bytes >> 20)
                  << " MiB) in " << line.seconds() << " s"
                  << (options.since
                          ? ", " + std::to_string(report.blobs_left_out) + " blobs older than --since left out"
                          : "")
                  << "\n";
        return 0;
    } catch (const std::exception& error) {
        line.stop();
        std::cerr << "berth export: " << error.what() << "\n";
        return 1;
    }
}

}  // namespace berth::cli
