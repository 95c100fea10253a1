// Backups and restore (storage/backup.hpp, docs/backup.md) on real stores in temp dirs: what a
// backup holds and says of itself, a restore giving back the same index and blobs, damaged
// backups refused, and what a server's BackupJob reports.
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "berth/observe/metrics.hpp"
#include "berth/storage/backup.hpp"
#include "fixtures.hpp"

using namespace berth;
namespace fs = std::filesystem;
namespace target_layout = storage::layout::backup;
using nlohmann::json;
using storage::BackupError;

namespace {

// A store holding images in two repositories, an index, a referrer, an untagged manifest and a
// deleted tag, pushed through a registry; configured with two peers.
struct Filled : test::RegistryFixture {
    Filled() {
        app_v1 = push("team/app", "v1", "1");
        app_v2 = push("team/app", "v2", "2");
        referrer = push("team/app", "", "sig", app_v1);
        index = push_index("team/app", "multi", {app_v1, app_v2});
        base = push("base/debian", "bookworm", "debian");
        reg.delete_manifest("team/app", "v2");
        meta.put_setting(storage::layout::setting::replica_id, "test");
        meta.put_setting(storage::layout::setting::log_epoch, "0123456789abcdef");  // as replication sets it
        meta.put_setting(storage::layout::setting::peer_addresses, "berth-1:5000\nberth-2:5000\n");
    }
    std::string app_v1, app_v2, referrer, index, base;
    static constexpr std::size_t blob_count = 8;  // a config and a layer per image; the index has none
};

// A store's blob files: digest -> bytes.
std::map<std::string, std::string> blob_files(const storage::BlobStore& blobs) {
    std::map<std::string, std::string> out;
    blobs.for_each([&](const oci::Digest& digest, std::uint64_t, std::int64_t) {
        out[digest.str()] = *blobs.read(digest, 1 << 20);
    });
    return out;
}

std::uint64_t total_bytes(const std::map<std::string, std::string>& files) {
    std::uint64_t bytes = 0;
    for (auto& [digest, content] : files) bytes += content.size();
    return bytes;
}

// Every manifest, tag and link record of an index, tombstones included, one line each.
std::vector<std::string> records(const storage::MetaStore& meta) {
    struct Lines : storage::MetaStore::StateVisitor {
        std::vector<std::string> out;
        static std::string stamp(const storage::Stamp& s) { return std::to_string(s.clock) + "/" + s.replica; }
        void manifest(const std::string& repo, const std::string& digest, const storage::ManifestRecord& r) override {
            out.push_back("manifest " + repo + "@" + digest + " " + stamp(r.stamp) + (r.deleted ? " deleted " : " ") +
                          r.media_type + " " + r.subject + " " + r.bytes);
        }
        void tag(const std::string& repo, const std::string& tag, const storage::TagRecord& r) override {
            out.push_back("tag " + repo + ":" + tag + " " + stamp(r.stamp) + " " + r.digest);
        }
        void link(const std::string& repo, const std::string& digest, const storage::LinkRecord& r) override {
            out.push_back("link " + repo + "@" + digest + " " + stamp(r.stamp) + (r.deleted ? " deleted" : ""));
        }
    } lines;
    meta.visit_state(lines);
    std::sort(lines.out.begin(), lines.out.end());
    return lines.out;
}

std::string sha256_hex(const std::string& bytes) { return test::sha256(bytes).hex(); }

json description(const fs::path& backup) { return json::parse(test::read_file(target_layout::description(backup))); }

// Writes a backup.json whose checksum file agrees with it: a description that lies consistently.
void rewrite_description(const fs::path& backup, const json& doc) {
    const auto text = doc.dump(2);
    std::ofstream(target_layout::description(backup), std::ios::binary | std::ios::trunc) << text;
    std::ofstream(target_layout::description_sum(backup), std::ios::binary | std::ios::trunc)
        << sha256_hex(text) << "\n";
}

// Replaces a file by another with these bytes (a hard-linked file's other name keeps the old ones).
void replace_file(const fs::path& file, const std::string& bytes) {
    fs::remove(file);
    std::ofstream(file, std::ios::binary) << bytes;
}

fs::path target_blob(const fs::path& target, const std::string& digest) {
    return storage::layout::blob_file(target_layout::blobs_dir(target), *oci::Digest::parse(digest));
}

// What is in a directory tree, relative names, for "nothing changed" checks.
std::set<std::string> tree(const fs::path& dir) {
    std::set<std::string> out;
    std::error_code ec;
    for (auto& entry : fs::recursive_directory_iterator(dir, ec)) out.insert(fs::relative(entry.path(), dir).string());
    return out;
}

std::string message_of(const std::function<void()>& call) {
    try {
        call();
    } catch (const BackupError& error) {
        return error.what();
    }
    FAIL("expected a BackupError");
    return {};
}

bool contains(const std::vector<std::string>& lines, const std::string& part) {
    return std::any_of(lines.begin(), lines.end(),
                       [&](const std::string& line) { return line.find(part) != std::string::npos; });
}

// Waits for the backup a BackupJob runs on its own thread to end (start() marks it running
// before returning), then gives the status it ended with.
storage::BackupStatus finished(const storage::BackupJob& job) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
    while (job.status().state == "running" && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    auto status = job.status();
    REQUIRE(status.state != "running");
    return status;
}

std::string metrics(const storage::BackupJob& job) {
    observe::MetricsWriter writer;
    job.write_metrics(writer);
    return writer.text();
}

}  // namespace

TEST_CASE("a backup lists every blob file and copies the index, and says so in backup.json", "[backup]") {
    Filled f;
    TempDir target;
    const auto files = blob_files(f.blobs);
    REQUIRE(files.size() == Filled::blob_count);
    std::vector<storage::BackupProgress> progress;
    auto report = storage::take_backup(f.meta, f.blobs, target.path(), false,
                                       [&](const storage::BackupProgress& p) { progress.push_back(p); });

    CHECK(report.id.size() == 16);  // YYYYMMDDTHHMMSSZ
    CHECK(report.id[8] == 'T');
    CHECK(report.id.back() == 'Z');
    CHECK(storage::backup_ids(target.path()) == std::vector<std::string>{report.id});
    CHECK(report.dir == target_layout::backup_dir(target.path(), report.id));
    CHECK_FALSE(report.incremental);
    CHECK(report.log_head == f.meta.log_head());
    CHECK(report.blobs == files.size());
    CHECK(report.bytes == total_bytes(files));
    CHECK(report.copied == files.size());
    CHECK(report.copied_bytes == report.bytes);
    CHECK(report.damaged == 0);
    REQUIRE(progress.size() >= 2);
    CHECK(progress.front().stage == "index");
    CHECK(progress.back().stage == "done");
    CHECK(progress.back().blobs == report.blobs);

    // blobs.txt: each blob file of the store, with its size; each in the target, the same bytes
    // (hard-linked: the target is on the store's file system).
    std::map<std::string, std::uint64_t> listed;
    std::istringstream list(test::read_file(target_layout::blob_list(report.dir)));
    std::string digest;
    for (std::uint64_t size = 0; list >> digest >> size;) listed[digest] = size;
    REQUIRE(listed.size() == files.size());
    for (auto& [d, content] : files) {
        CHECK(listed[d] == content.size());
        CHECK(test::read_file(target_blob(target.path(), d)) == content);
        CHECK(fs::equivalent(target_blob(target.path(), d), test::blob_path(f.dir.path(), *oci::Digest::parse(d))));
    }

    const auto text = test::read_file(target_layout::description(report.dir));
    CHECK(test::read_file(target_layout::description_sum(report.dir)) == sha256_hex(text) + "\n");
    auto doc = json::parse(text);
    CHECK(doc["format"] == "berth-backup-v1");
    CHECK(doc["id"] == report.id);
    CHECK(doc["replica_id"] == "test");
    CHECK(doc["log_epoch"] == f.meta.setting(storage::layout::setting::log_epoch).value());
    CHECK(doc["log_head"] == report.log_head);
    CHECK(doc["incremental"] == false);
    CHECK(doc["peers"] == json::array({"berth-1:5000", "berth-2:5000"}));
    CHECK(doc["blobs"]["count"] == files.size());
    CHECK(doc["blobs"]["bytes"] == report.bytes);
    CHECK(doc["blobs"]["list_sha256"] == sha256_hex(test::read_file(target_layout::blob_list(report.dir))));
    REQUIRE_FALSE(doc["meta_files"].empty());
    for (auto& file : doc["meta_files"]) {
        const auto bytes = test::read_file(target_layout::meta_dir(report.dir) / file["name"].get<std::string>());
        CHECK(file["size"] == bytes.size());
        CHECK(file["sha256"] == sha256_hex(bytes));
    }
    CHECK(storage::backup_peers(target.path(), report.id) == std::vector<std::string>{"berth-1:5000", "berth-2:5000"});

    auto verified = storage::verify_backups(target.path());
    CHECK(verified.damage.empty());
    CHECK(verified.backups == 1);
    CHECK(verified.blobs == files.size());
    CHECK(verified.bytes == report.bytes);

    // A second full backup into the same target is refused.
    CHECK(message_of([&] {
              storage::take_backup(f.meta, f.blobs, target.path(), false);
          }).find("holds backups already") != std::string::npos);
}

TEST_CASE("an incremental backup copies only new blob files; prune keeps the newest and what they list", "[backup]") {
    Filled f;
    TempDir target;
    auto first = storage::take_backup(f.meta, f.blobs, target.path(), false);
    f.push("team/app", "v3", "3");  // two new blobs
    const auto lost = test::digest_of("layer-debian");
    fs::remove(test::blob_path(f.dir.path(), *oci::Digest::parse(lost)));  // gone from the store since the first

    auto second = storage::take_backup(f.meta, f.blobs, target.path(), true);
    CHECK(second.id > first.id);  // taken within a second of the first: named a second later
    CHECK(second.incremental);
    CHECK(second.copied == 2);
    CHECK(second.blobs == first.blobs + 2 - 1);
    CHECK(storage::backup_ids(target.path()) == std::vector<std::string>{first.id, second.id});
    CHECK(storage::verify_backups(target.path()).damage.empty());

    auto pruned = storage::prune_backups(target.path(), 1);
    CHECK(pruned.removed == std::vector<std::string>{first.id});
    CHECK(pruned.blobs_removed == 1);  // the lost blob: the remaining backup does not list it
    CHECK(pruned.bytes_removed == std::string("layer-debian").size());
    CHECK_FALSE(fs::exists(target_blob(target.path(), lost)));
    CHECK(storage::backup_ids(target.path()) == std::vector<std::string>{second.id});
    CHECK(storage::verify_backups(target.path()).damage.empty());
    CHECK(storage::prune_backups(target.path(), 1).removed.empty());
}

TEST_CASE("a restore into an empty root gives the same index and blob files, under a new log epoch", "[backup]") {
    Filled f;
    TempDir target, root;
    auto taken = storage::take_backup(f.meta, f.blobs, target.path(), false);
    std::vector<std::string> stages;
    auto restored = storage::restore_backup(target.path(), "", root.path(),
                                            [&](const storage::BackupProgress& p) { stages.push_back(p.stage); });
    CHECK(restored.id == taken.id);
    CHECK(restored.blobs == taken.blobs);
    CHECK(restored.bytes == taken.bytes);
    CHECK(restored.linked == taken.blobs);  // one file system: hard links
    CHECK(restored.peers == std::vector<std::string>{"berth-1:5000", "berth-2:5000"});
    CHECK(stages == std::vector<std::string>{"index", "done"});

    {
        storage::MetaStore meta(storage::layout::meta_dir(root.path()));
        storage::FileBlobStore blobs(root.path());
        CHECK(records(meta) == records(f.meta));
        CHECK(meta.log_head() == f.meta.log_head());
        CHECK(meta.tags("team/app", "", 100) == std::vector<std::string>{"multi", "v1"});
        CHECK(meta.setting(storage::layout::setting::replica_id) == "test");
        const auto epoch = meta.setting(storage::layout::setting::log_epoch).value_or("");
        CHECK(epoch.size() == 16);
        CHECK(epoch != f.meta.setting(storage::layout::setting::log_epoch).value());
        CHECK(meta.setting(storage::layout::setting::peer_cursors) == "{}");
        CHECK(blob_files(blobs) == blob_files(f.blobs));

        // A registry over the restored store serves what was pushed.
        storage::HybridClock clock(storage::system_wall_clock());
        registry::Registry reg(test::registry_options(), blobs, meta, clock);
        CHECK(reg.get_manifest("team/app", "v1").digest.str() == f.app_v1);
        CHECK(reg.get_manifest("base/debian", f.base).bytes == f.meta.manifest("base/debian", f.base)->bytes);
        CHECK(reg.stat_blob("team/app", test::digest_of("layer-2")).size == 7);
    }

    // Never over a store, nor from a backup that is not there.
    CHECK(message_of([&] { storage::restore_backup(target.path(), "", root.path()); }).find("holds a store already") !=
          std::string::npos);
    TempDir other;
    CHECK(message_of([&] {
              storage::restore_backup(target.path(), "20000101T000000Z", other.path());
          }).find("holds no backup 20000101T000000Z") != std::string::npos);
    CHECK(message_of([&] { storage::restore_backup(other.path(), "", root.path()); }).find("holds no backup") !=
          std::string::npos);
}

TEST_CASE("damage to a backup is found by verify and refused by restore", "[backup]") {
    Filled f;
    TempDir target, root;
    auto taken = storage::take_backup(f.meta, f.blobs, target.path(), false);
    const auto backup = taken.dir;
    const auto layer = test::digest_of("layer-1");
    auto verify = [&] { return storage::verify_backups(target.path()).damage; };
    auto restore = [&] { return message_of([&] { storage::restore_backup(target.path(), "", root.path()); }); };

    SECTION("a blob file holding other bytes") {
        replace_file(target_blob(target.path(), layer), "LAYER-1");  // the same size
        CHECK(contains(verify(), "holds bytes of " + test::digest_of("LAYER-1")));
        CHECK(restore().find("blob " + layer + " is damaged in the backup") != std::string::npos);
    }
    SECTION("a blob file cut short") {
        replace_file(target_blob(target.path(), layer), "layer");
        CHECK(contains(verify(), "blob " + layer + " has another size"));
        CHECK(restore().find("blob " + layer + " is damaged in the backup") != std::string::npos);
    }
    SECTION("a blob file gone") {
        fs::remove(target_blob(target.path(), layer));
        CHECK(contains(verify(), "blob " + layer + " is gone"));
        CHECK(restore().find("blob " + layer + " is gone from the backup") != std::string::npos);
    }
    SECTION("an index file holding other bytes") {
        const auto name = description(backup)["meta_files"][0]["name"].get<std::string>();
        const auto file = target_layout::meta_dir(backup) / name;
        replace_file(file, test::read_file(file) + "x");
        CHECK(contains(verify(), "index file " + name + " is damaged or gone"));
        CHECK(restore().find("index file " + name + " is damaged") != std::string::npos);
    }
    SECTION("backup.json edited without its checksum") {
        auto text = test::read_file(target_layout::description(backup));
        text.replace(text.find("berth-1"), 7, "berth-9");
        replace_file(target_layout::description(backup), text);
        CHECK(contains(verify(), "backup.json does not match its checksum"));
        CHECK(restore().find("backup.json does not match its checksum") != std::string::npos);
        CHECK(tree(root.path()).empty());  // refused before anything was written
    }
    SECTION("a description that lies about an index file, with a checksum that agrees") {
        auto doc = description(backup);
        doc["meta_files"][0]["sha256"] = std::string(64, '0');
        rewrite_description(backup, doc);
        CHECK(contains(verify(), "is damaged or gone"));
        CHECK(restore().find("is damaged") != std::string::npos);
    }
    SECTION("a description naming an index file outside the index") {
        auto doc = description(backup);
        doc["meta_files"].push_back({{"name", "../backup.json"}, {"size", 1}, {"sha256", std::string(64, '0')}});
        rewrite_description(backup, doc);
        CHECK(restore().find("outside the index: ../backup.json") != std::string::npos);
    }
    SECTION("a description of another format") {
        auto doc = description(backup);
        doc["format"] = "berth-backup-v0";
        rewrite_description(backup, doc);
        CHECK(contains(verify(), "is not a berth-backup-v1 description"));
        CHECK(restore().find("is not a berth-backup-v1 description") != std::string::npos);
    }
    SECTION("a blob list that no longer matches the description") {
        auto list = test::read_file(target_layout::blob_list(backup));
        replace_file(target_layout::blob_list(backup), list.substr(0, list.find('\n') + 1));
        CHECK(contains(verify(), "blobs.txt does not match backup.json"));
        CHECK(contains(verify(), "blobs.txt lists 1 blobs, backup.json 8"));
    }
    // The backup itself is never changed by a check or a refused restore.
    const auto before = tree(target.path());
    verify();
    CHECK(tree(target.path()) == before);
}

// Known bugs (see the report of the change that added them): each case asserts what docs/backup.md
// and storage/backup.hpp promise, and fails today; Catch counts it passed while it fails. Drop
//  when the code is fixed.
TEST_CASE("a refused restore leaves the root as it was, so it can be retried", "[backup]") {
    Filled f;
    TempDir target, root;
    storage::take_backup(f.meta, f.blobs, target.path(), false);
    const auto layer = target_blob(target.path(), test::digest_of("layer-1"));
    replace_file(layer, "LAYER-1");
    CHECK_THROWS_AS(storage::restore_backup(target.path(), "", root.path()), BackupError);
    CHECK(tree(root.path()).empty());  // today: meta/ and the blobs placed before the damaged one
    replace_file(layer, "layer-1");    // the damage repaired (from another copy of the target)
    CHECK_NOTHROW(storage::restore_backup(target.path(), "", root.path()));  // today: "holds a store already"
}

TEST_CASE("a restore refuses a blob list that does not match its description", "[backup]") {
    Filled f;
    TempDir target, root;
    auto taken = storage::take_backup(f.meta, f.blobs, target.path(), false);
    auto list = test::read_file(target_layout::blob_list(taken.dir));
    replace_file(target_layout::blob_list(taken.dir), list.substr(0, list.find('\n') + 1));  // 1 line of 8
    // Today the restore succeeds with one blob file of eight: an index linking blobs it lacks.
    CHECK_THROWS_AS(storage::restore_backup(target.path(), "", root.path()), BackupError);
}

TEST_CASE("a store blob whose bytes no longer match its digest is left out of a backup and counted", "[backup]") {
    Filled f;
    TempDir target;
    const auto layer = test::digest_of("layer-1");
    replace_file(test::blob_path(f.dir.path(), *oci::Digest::parse(layer)), "LAYER-1");  // bit rot, the same size
    auto report = storage::take_backup(f.meta, f.blobs, target.path(), false);
    // Today it is hard-linked without being read (only a copy is re-hashed): listed, not counted,
    // and every restore of the backup then fails on it.
    CHECK(report.damaged == 1);
    CHECK(report.blobs == Filled::blob_count - 1);
    CHECK(test::read_file(target_layout::blob_list(report.dir)).find(layer) == std::string::npos);
}

TEST_CASE("a server's backup job says what it took, and why its last run failed", "[backup]") {
    Filled f;
    TempDir target;
    storage::BackupOptions options;
    options.target = target.path();
    options.keep = 1;
    storage::BackupJob job(options, f.meta, f.blobs);

    auto idle = job.status();
    CHECK(idle.state == "idle");
    CHECK(idle.id.empty());
    CHECK(idle.started == 0);
    CHECK(idle.last_success == 0);

    REQUIRE(job.start());
    auto first = finished(job);
    CHECK(first.state == "succeeded");
    CHECK(storage::backup_ids(target.path()) == std::vector<std::string>{first.id});
    CHECK(first.stage.empty());
    CHECK(first.blobs == Filled::blob_count);
    CHECK(first.bytes == total_bytes(blob_files(f.blobs)));
    CHECK(first.copied == Filled::blob_count);
    CHECK(first.damaged == 0);
    CHECK(first.error.empty());
    CHECK(first.started > 0);
    CHECK(first.finished >= first.started);
    CHECK(first.last_success == first.finished);
    auto text = metrics(job);
    CHECK(text.find("berth_backups_total{result=\"succeeded\"} 1\n") != std::string::npos);
    CHECK(text.find("berth_backups_total{result=\"failed\"} 0\n") != std::string::npos);
    CHECK(text.find("berth_backup_running 0\n") != std::string::npos);

    // The next one adds to the target (incremental), then prunes to `keep`.
    f.push("team/app", "v3", "3");
    REQUIRE(job.start());
    auto second = finished(job);
    CHECK(second.state == "succeeded");
    CHECK(second.id > first.id);
    CHECK(second.copied == 2);
    CHECK(second.blobs == Filled::blob_count + 2);
    CHECK(storage::backup_ids(target.path()) == std::vector<std::string>{second.id});

    // A target whose blob tree cannot be written: the run fails, the last success stays.
    fs::rename(target_layout::blobs_dir(target.path()), target.path() / "moved");
    std::ofstream(target_layout::blobs_dir(target.path())) << "not a directory";
    REQUIRE(job.start());
    auto failed = finished(job);
    CHECK(failed.state == "failed");
    CHECK_FALSE(failed.error.empty());
    CHECK(failed.id == second.id);
    CHECK(failed.blobs == second.blobs);
    CHECK(failed.last_success == second.last_success);
    CHECK(failed.finished >= failed.started);
    CHECK(storage::backup_ids(target.path()) == std::vector<std::string>{second.id});
    text = metrics(job);
    CHECK(text.find("berth_backups_total{result=\"succeeded\"} 2\n") != std::string::npos);
    CHECK(text.find("berth_backups_total{result=\"failed\"} 1\n") != std::string::npos);
}

TEST_CASE("a server's backup job into a target it cannot use fails with a reason, never a backup", "[backup]") {
    Filled f;
    TempDir dir;
    std::ofstream(dir.path() / "file") << "x";
    storage::BackupOptions options;
    options.target = dir.path() / "file";
    storage::BackupJob job(options, f.meta, f.blobs);
    REQUIRE(job.start());
    auto status = finished(job);
    CHECK(status.state == "failed");
    CHECK_FALSE(status.error.empty());
    CHECK(status.id.empty());
    CHECK(status.last_success == 0);
    CHECK(metrics(job).find("berth_backup_last_success_timestamp_seconds 0\n") != std::string::npos);
}
