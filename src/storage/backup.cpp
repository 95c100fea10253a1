// Backups (storage/backup.hpp, layout.hpp's backup tree): the index copied from one RocksDB
// snapshot, then the blob files; a backup is written under .partial-<id> and renamed into place
// once every file in it is durable, so a backup that exists is complete.
#include "berth/storage/backup.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <fstream>
#include <set>
#include <sstream>
#include <unordered_set>

#include "berth/oci/encoding.hpp"
#include "berth/oci/json.hpp"
#include "berth/observe/log.hpp"
#include "berth/storage/blob_hash.hpp"
#include "berth/storage/blob_store.hpp"
#include "files.hpp"
#include "meta_store_impl.hpp"

namespace berth::storage {

namespace fs = std::filesystem;
using nlohmann::json;

// A backup links the files store's blob files rather than copying them.
struct BackupFiles {
    static std::optional<fs::path> path(const BlobStore& blobs, const oci::Digest& digest) {
        auto* files = dynamic_cast<const FileBlobStore*>(&blobs);
        if (!files) return std::nullopt;
        return files->path(digest);
    }
};

namespace {

constexpr const char* backup_format = "berth-backup-v1";

[[noreturn]] void fail(const std::string& what) { throw BackupError(what); }

std::string utc_id(std::chrono::system_clock::time_point when) {
    auto t = std::chrono::system_clock::to_time_t(when);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char text[32];
    std::strftime(text, sizeof text, "%Y%m%dT%H%M%SZ", &tm);
    return text;
}

// Reads a blob through a hasher, and writes a copy to `to` (fsynced) when given.
std::pair<oci::Digest, std::uint64_t> copy_blob(const OpenBlob& in, oci::DigestAlgorithm algorithm, const fs::path* to,
                                                const std::string& name) {
    int out = -1;
    if (to) {
        out = ::open(to->c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (out < 0) fail("cannot write " + to->string());
    }
    bool ok = true;
    std::optional<Hashed> hashed;
    try {
        hashed = hash(in, algorithm, [&](const char* data, std::size_t n) {
            for (std::size_t written = 0; out >= 0 && written < n;) {
                auto w = ::write(out, data + written, n - written);
                if (w <= 0) return ok = false;
                written += static_cast<std::size_t>(w);
            }
            return true;
        });
    } catch (const std::exception&) {
        ok = false;
    }
    if (out >= 0) {
        if (::fsync(out) != 0) ok = false;
        ::close(out);
    }
    if (!ok || !hashed) fail("cannot copy " + name);
    return {hashed->digest, hashed->size};
}

// Reads a file through a hasher; writes a copy to `to` (fsynced) when given. Returns the
// digest (of the algorithm asked) and the size.
std::pair<oci::Digest, std::uint64_t> hash_file(const fs::path& from, oci::DigestAlgorithm algorithm,
                                                const fs::path* to = nullptr) {
    auto in = open_file(from);
    if (!in) fail("cannot read " + from.string());
    return copy_blob(*in, algorithm, to, from.string());
}

std::string sha256_hex(const fs::path& file) { return hash_file(file, oci::DigestAlgorithm::sha256).first.hex(); }

void write_durably(const fs::path& file, const std::string& text) {
    {
        std::ofstream out(file, std::ios::binary | std::ios::trunc);
        out << text;
        if (!out.flush()) fail("cannot write " + file.string());
    }
    fsync_path(file);
}

std::string read_file(const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    if (!in) fail("cannot read " + file.string());
    return {std::istreambuf_iterator<char>(in), {}};
}

// A blob file in a tree of blob files (the store's, a target's): layout's one naming.
fs::path blob_in(const fs::path& blobs_dir, const oci::Digest& digest) { return layout::blob_file(blobs_dir, digest); }

// Puts the blob file `from` at `to`: a hard link when both are on one file system, otherwise a
// verified copy; a link too is verified first when `verify_links`. false when the bytes no longer
// match the digest.
bool place_blob(const fs::path& from, const fs::path& to, const oci::Digest& digest, bool& linked,
                bool verify_links = false) {
    fs::create_directories(to.parent_path());
    if (verify_links && hash_file(from, digest.algorithm()).first != digest) return false;
    linked = ::link(from.c_str(), to.c_str()) == 0;
    if (linked || errno == EEXIST) return true;
    const auto scratch = to.parent_path() / (".copy-" + oci::random_hex(8));
    auto [copied, size] = hash_file(from, digest.algorithm(), &scratch);
    if (copied != digest) {
        fs::remove(scratch);
        return false;
    }
    if (::rename(scratch.c_str(), to.c_str()) != 0) fail("cannot rename into " + to.string());
    return true;
}

void sync_dirs(const std::set<fs::path>& dirs) {
    for (auto& dir : dirs) fsync_path(dir);
}

bool blobs_in_bucket(const json& description) { return description.at("blobs").value("in", "backup") == "bucket"; }

json read_description(const fs::path& backup) {
    auto text = read_file(layout::backup::description(backup));
    auto sum = read_file(layout::backup::description_sum(backup));
    while (!sum.empty() && (sum.back() == '\n' || sum.back() == ' ')) sum.pop_back();
    if (oci::Digest::of(oci::DigestAlgorithm::sha256, text).hex() != sum)
        fail(backup.filename().string() + ": backup.json does not match its checksum");
    auto description = oci::parse_json(text);
    if (!description.is_object() || description.value("format", "") != backup_format)
        fail(backup.filename().string() + ": backup.json is not a " + std::string(backup_format) + " description");
    return description;
}

// Each line of a backup's blob list: (digest, size).
template <typename Visit>
void visit_blob_list(const fs::path& backup, Visit visit) {
    std::ifstream in(layout::backup::blob_list(backup));
    if (!in) fail("cannot read " + layout::backup::blob_list(backup).string());
    std::string digest;
    std::uint64_t size = 0;
    while (in >> digest >> size) {
        auto parsed = oci::Digest::parse(digest);
        if (!parsed) fail(backup.filename().string() + ": blobs.txt names no digest: " + digest.substr(0, 80));
        visit(*parsed, size);
    }
}

}  // namespace

std::uint64_t MetaStore::copy_to(const fs::path& dir) const {
    if (fs::exists(dir)) fail(dir.string() + " exists already");
    rocksdb::DBOptions options;
    options.create_if_missing = true;
    options.create_missing_column_families = true;
    options.error_if_exists = true;
    std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
    for (auto* name : column_families) descriptors.emplace_back(name, rocksdb::ColumnFamilyOptions());
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* raw = nullptr;
    check(rocksdb::DB::Open(options, dir.string(), descriptors, &handles, &raw), "open backup index");
    std::unique_ptr<rocksdb::DB> copy(raw);
    // One moment for every family: a snapshot of a store open for writing; a read-only store
    // does not change.
    const rocksdb::Snapshot* snapshot = impl_->db->GetSnapshot();
    rocksdb::ReadOptions read;
    read.snapshot = snapshot;
    read.fill_cache = false;
    rocksdb::WriteOptions write_options;
    write_options.disableWAL = true;  // flushed below, before the copy is called complete
    std::uint64_t head = 0;
    try {
        for (int f = 0; f < cf_count; ++f) {
            if (!impl_->cf(f)) continue;
            std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(read, impl_->cf(f)));
            rocksdb::WriteBatch batch;
            for (it->SeekToFirst(); it->Valid(); it->Next()) {
                check(batch.Put(handles[f], it->key(), it->value()), "backup copy");
                if (f == cf_log) head = sequence_of(it->key());
                if (batch.GetDataSize() >= 8 << 20) {
                    check(copy->Write(write_options, &batch), "backup copy");
                    batch.Clear();
                }
            }
            check(it->status(), "backup read");
            check(copy->Write(write_options, &batch), "backup copy");
        }
        check(copy->Flush(rocksdb::FlushOptions(), handles), "backup flush");
    } catch (...) {
        if (snapshot) impl_->db->ReleaseSnapshot(snapshot);
        for (auto* handle : handles) copy->DestroyColumnFamilyHandle(handle);
        throw;
    }
    if (snapshot) impl_->db->ReleaseSnapshot(snapshot);
    for (auto* handle : handles) copy->DestroyColumnFamilyHandle(handle);
    check(copy->Close(), "close backup index");
    return head;
}

namespace {

// The index copied from one snapshot into partial/meta, each file synced: what backup.json lists.
json copy_index(const MetaStore& meta, const fs::path& partial, BackupReport& report) {
    report.log_head = meta.copy_to(layout::backup::meta_dir(partial));
    auto meta_files = json::array();
    for (auto& entry : fs::directory_iterator(layout::backup::meta_dir(partial))) {
        if (!entry.is_regular_file()) continue;
        fsync_path(entry.path());
        meta_files.push_back({{"name", entry.path().filename().string()},
                              {"size", entry.file_size()},
                              {"sha256", sha256_hex(entry.path())}});
    }
    fsync_path(layout::backup::meta_dir(partial));
    return meta_files;
}

// Every blob file the store holds now, placed in the target's content-addressed tree (what is
// there whole already is kept) and listed. What the copied index links was committed before it (a
// link follows its blob), and garbage collection removes only what has been unlinked for longer
// than its grace.
void place_blobs(const BlobStore& blobs, const fs::path& target, const fs::path& partial, BackupReport& report,
                 const std::function<void(const BackupProgress&)>& progress) {
    const auto target_blobs = layout::backup::blobs_dir(target);
    std::set<fs::path> touched;
    std::ofstream list(layout::backup::blob_list(partial), std::ios::binary | std::ios::trunc);
    blobs.for_each([&](const oci::Digest& digest, std::uint64_t size, std::int64_t) {
        const auto to = blob_in(target_blobs, digest);
        std::error_code ec;
        const auto present = fs::file_size(to, ec);
        if (ec || present != size) {
            if (!ec) fs::remove(to);  // a damaged or partial copy: replaced
            bool linked = false;
            // A link too is read first: a store blob whose bytes rotted must not become a backup's.
            const auto from = BackupFiles::path(blobs, digest);
            if (!from) fail("backups of blobs outside the files store are not supported");
            if (!place_blob(*from, to, digest, linked, true)) {
                ++report.damaged;
                observe::log("error", "backup: a blob file does not match its digest; left out",
                             {{"digest", digest.str()}});
                return;
            }
            touched.insert(to.parent_path());
            ++report.copied;
            report.copied_bytes += size;
        }
        list << digest.str() << ' ' << size << '\n';
        ++report.blobs;
        report.bytes += size;
        if (progress && report.blobs % 1000 == 0) progress({"blobs", report.blobs, report.bytes});
    });
    if (!list.flush()) fail("cannot write " + layout::backup::blob_list(partial).string());
    list.close();
    sync_dirs(touched);
    fsync_path(layout::backup::blob_list(partial));
}

// A store whose blobs are in a bucket: the bucket's objects listed, not copied (the bucket is
// their backup's business: versioning, its own replication). Verified against the index copied
// before the listing: a blob it links was in the bucket before that (a link follows its blob),
// so one the listing lacks is lost; counted as damaged and logged, and the backup completes.
void list_bucket_blobs(const BlobStore& blobs, const fs::path& partial, BackupReport& report,
                       const std::function<void(const BackupProgress&)>& progress) {
    std::unordered_set<std::string> listed;
    std::ofstream list(layout::backup::blob_list(partial), std::ios::binary | std::ios::trunc);
    blobs.for_each([&](const oci::Digest& digest, std::uint64_t size, std::int64_t) {
        list << digest.str() << ' ' << size << '\n';
        listed.insert(digest.str());
        ++report.blobs;
        report.bytes += size;
        if (progress && report.blobs % 1000 == 0) progress({"blobs", report.blobs, report.bytes});
    });
    if (!list.flush()) fail("cannot write " + layout::backup::blob_list(partial).string());
    list.close();
    fsync_path(layout::backup::blob_list(partial));
    struct Links : MetaStore::StateVisitor {
        std::unordered_set<std::string> linked;
        void manifest(const std::string&, const std::string&, const ManifestRecord&) override {}
        void tag(const std::string&, const std::string&, const TagRecord&) override {}
        void link(const std::string&, const std::string& digest, const LinkRecord& r) override {
            if (!r.deleted) linked.insert(digest);
        }
    } links;
    MetaStore(layout::backup::meta_dir(partial), MetaStore::Mode::read_only).visit_state(links);
    for (auto& digest : links.linked)
        if (!listed.count(digest)) {
            ++report.damaged;
            observe::log("error", "backup: a blob the index links is not in the bucket", {{"digest", digest}});
        }
}

// backup.json and its checksum, durably: what verify and restore read first.
void describe(const MetaStore& meta, const fs::path& partial, const BackupReport& report,
              std::chrono::system_clock::time_point now, json meta_files) {
    auto peers = json::array();
    std::istringstream addresses(meta.setting(layout::setting::peer_addresses).value_or(""));
    for (std::string address; std::getline(addresses, address);)
        if (!address.empty()) peers.push_back(address);
    const json description = {
        {"format", backup_format},
        {"id", report.id},
        {"created", std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count()},
        {"replica_id", meta.setting(layout::setting::replica_id).value_or("")},
        {"log_epoch", meta.setting(layout::setting::log_epoch).value_or("")},
        {"log_head", report.log_head},
        {"incremental", report.incremental},
        {"peers", peers},
        {"meta_files", std::move(meta_files)},
        {"blobs",
         {{"in", report.blobs_in_bucket ? "bucket" : "backup"},
          {"count", report.blobs},
          {"bytes", report.bytes},
          {"copied", report.copied},
          {"copied_bytes", report.copied_bytes},
          {"list_sha256", sha256_hex(layout::backup::blob_list(partial))}}}};
    const auto text = description.dump(2);
    write_durably(layout::backup::description(partial), text);
    write_durably(layout::backup::description_sum(partial),
                  oci::Digest::of(oci::DigestAlgorithm::sha256, text).hex() + "\n");
    fsync_path(partial);
}

}  // namespace

BackupReport take_backup(const MetaStore& meta, const BlobStore& blobs, const fs::path& target, bool incremental,
                         const std::function<void(const BackupProgress&)>& progress) {
    const auto existing = backup_ids(target);
    if (!incremental && !existing.empty())
        fail(target.string() + " holds backups already (" + existing.back() + "): --incremental adds to them");
    fs::create_directories(layout::backup::backups_dir(target));
    // What a crash left behind: never a backup.
    for (auto& entry : fs::directory_iterator(layout::backup::backups_dir(target)))
        if (layout::backup::is_partial(entry.path())) fs::remove_all(entry.path());

    BackupReport report;
    report.incremental = !existing.empty();
    auto now = std::chrono::system_clock::now();
    report.id = utc_id(now);
    // Two backups within a second: the second waits for its own name.
    while (std::find(existing.begin(), existing.end(), report.id) != existing.end() ||
           fs::exists(layout::backup::backup_dir(target, report.id)))
        report.id = utc_id(now += std::chrono::seconds(1));
    const auto partial = layout::backup::partial_dir(target, report.id);
    fs::create_directories(partial);

    if (progress) progress({"index", 0, 0});
    auto meta_files = copy_index(meta, partial, report);
    report.blobs_in_bucket = blobs.remote();
    if (report.blobs_in_bucket) list_bucket_blobs(blobs, partial, report, progress);
    else place_blobs(blobs, target, partial, report, progress);
    describe(meta, partial, report, now, std::move(meta_files));
    report.dir = layout::backup::backup_dir(target, report.id);
    fs::rename(partial, report.dir);
    fsync_path(layout::backup::backups_dir(target));
    if (progress) progress({"done", report.blobs, report.bytes});
    return report;
}

std::vector<std::string> backup_ids(const fs::path& target) {
    std::vector<std::string> out;
    std::error_code ec;
    for (auto& entry : fs::directory_iterator(layout::backup::backups_dir(target), ec))
        if (entry.is_directory() && !layout::backup::is_partial(entry.path()) &&
            fs::exists(layout::backup::description(entry.path())))
            out.push_back(entry.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
}

VerifyReport verify_backups(const fs::path& target, const std::function<void(const BackupProgress&)>& progress) {
    VerifyReport report;
    const auto target_blobs = layout::backup::blobs_dir(target);
    // Each blob file once, whatever number of backups list it: its bytes must be its name.
    std::error_code ec;
    for (auto& algorithm : fs::directory_iterator(target_blobs, ec)) {
        auto alg = oci::parse_algorithm(algorithm.path().filename().string());
        if (!alg) continue;
        for (auto& entry : fs::recursive_directory_iterator(algorithm.path())) {
            if (!entry.is_regular_file()) continue;
            const auto name = entry.path().filename().string();
            if (name.starts_with(".copy-")) continue;  // a copy a crash cut short: listed by no backup
            auto expected = oci::Digest::parse(std::string(oci::algorithm_name(*alg)) + ":" + name);
            auto [digest, size] = hash_file(entry.path(), *alg);
            if (!expected || digest != *expected)
                report.damage.push_back("blob " + entry.path().string() + " holds bytes of " + digest.str());
            ++report.blobs;
            report.bytes += size;
            if (progress && report.blobs % 1000 == 0) progress({"blobs", report.blobs, report.bytes});
        }
    }
    const auto ids = backup_ids(target);
    if (ids.empty()) report.damage.push_back(target.string() + " holds no backup");
    for (auto& id : ids) {
        const auto backup = layout::backup::backup_dir(target, id);
        ++report.backups;
        try {
            auto description = read_description(backup);
            for (auto& file : description.at("meta_files")) {
                const auto path = layout::backup::meta_dir(backup) / file.at("name").get<std::string>();
                if (!fs::exists(path) || sha256_hex(path) != file.at("sha256").get<std::string>())
                    report.damage.push_back(id + ": index file " + path.filename().string() + " is damaged or gone");
            }
            if (sha256_hex(layout::backup::blob_list(backup)) != description.at("blobs").at("list_sha256"))
                report.damage.push_back(id + ": blobs.txt does not match backup.json");
            std::uint64_t listed = 0;
            const bool in_bucket = blobs_in_bucket(description);
            visit_blob_list(backup, [&](const oci::Digest& digest, std::uint64_t size) {
                ++listed;
                if (in_bucket) return;  // not here to check: the bucket keeps them
                std::error_code missing;
                auto found = fs::file_size(blob_in(target_blobs, digest), missing);
                if (missing || found != size)
                    report.damage.push_back(id + ": blob " + digest.str() +
                                            (missing ? " is gone" : " has another size"));
            });
            if (listed != description.at("blobs").at("count").get<std::uint64_t>())
                report.damage.push_back(id + ": blobs.txt lists " + std::to_string(listed) + " blobs, backup.json " +
                                        std::to_string(description.at("blobs").at("count").get<std::uint64_t>()));
        } catch (const std::exception& error) {
            report.damage.push_back(id + ": " + error.what());
        }
    }
    return report;
}

PruneReport prune_backups(const fs::path& target, std::size_t keep) {
    PruneReport report;
    auto ids = backup_ids(target);
    if (ids.size() <= keep) return report;
    const std::vector<std::string> doomed(ids.begin(), ids.end() - static_cast<std::ptrdiff_t>(keep));
    // Removed first, so a crash in the sweep below leaves only unlisted blob files.
    for (auto& id : doomed) {
        fs::remove_all(layout::backup::backup_dir(target, id));
        report.removed.push_back(id);
    }
    fsync_path(layout::backup::backups_dir(target));
    std::unordered_set<std::string> listed;
    for (auto& id : backup_ids(target))
        visit_blob_list(layout::backup::backup_dir(target, id),
                        [&](const oci::Digest& digest, std::uint64_t) { listed.insert(digest.str()); });
    std::error_code ec;
    const auto target_blobs = layout::backup::blobs_dir(target);
    for (auto& algorithm : fs::directory_iterator(target_blobs, ec)) {
        auto alg = oci::parse_algorithm(algorithm.path().filename().string());
        if (!alg) continue;
        std::vector<fs::path> unlisted;
        for (auto& entry : fs::recursive_directory_iterator(algorithm.path()))
            if (entry.is_regular_file() &&
                !listed.count(std::string(oci::algorithm_name(*alg)) + ":" + entry.path().filename().string()))
                unlisted.push_back(entry.path());
        for (auto& file : unlisted) {
            report.bytes_removed += fs::file_size(file);
            fs::remove(file);
            ++report.blobs_removed;
        }
    }
    return report;
}

std::vector<std::string> backup_peers(const fs::path& target, const std::string& id) {
    auto description = read_description(layout::backup::backup_dir(target, id));
    std::vector<std::string> out;
    for (auto& peer : description.value("peers", json::array()))
        if (peer.is_string()) out.push_back(peer.get<std::string>());
    return out;
}

namespace {

// A backup of a store whose blobs are in a bucket lists them; the restored replica finds them there.
void count_listed(const fs::path& backup, RestoreReport& report) {
    visit_blob_list(backup, [&](const oci::Digest&, std::uint64_t size) {
        ++report.blobs;
        report.bytes += size;
    });
}

// A backup's blob list as its description says it is, checked before a restore writes anything.
void require_whole_list(const fs::path& backup, const std::string& id, const json& description) {
    const auto& blobs = description.at("blobs");
    if (sha256_hex(layout::backup::blob_list(backup)) != blobs.at("list_sha256").get<std::string>())
        fail(id + ": blobs.txt does not match backup.json (berth backup verify)");
    std::uint64_t listed = 0;
    visit_blob_list(backup, [&](const oci::Digest&, std::uint64_t) { ++listed; });
    if (listed != blobs.at("count").get<std::uint64_t>())
        fail(id + ": blobs.txt lists " + std::to_string(listed) + " blobs, backup.json " +
             std::to_string(blobs.at("count").get<std::uint64_t>()));
}

void restore_index(const fs::path& backup, const std::string& id, const json& description, const fs::path& meta_dir) {
    fs::create_directories(meta_dir);
    for (auto& file : description.at("meta_files")) {
        const auto name = file.at("name").get<std::string>();
        if (name.find('/') != std::string::npos || name.starts_with("."))
            fail(id + ": backup.json names an index file outside the index: " + name);
        const auto to = meta_dir / name;
        auto [digest, size] = hash_file(layout::backup::meta_dir(backup) / name, oci::DigestAlgorithm::sha256, &to);
        if (digest.hex() != file.at("sha256").get<std::string>()) fail(id + ": index file " + name + " is damaged");
    }
    fsync_path(meta_dir);
}

// Every listed blob into root, read once either way: a restore never brings back bytes that are
// not what they claim. placed: the files written, for undoing a refused restore.
void restore_blobs(const fs::path& target, const fs::path& backup, const fs::path& root, RestoreReport& report,
                   std::vector<fs::path>& placed, const std::function<void(const BackupProgress&)>& progress) {
    FileBlobStore blobs(root);
    std::set<fs::path> touched;
    const auto target_blobs = layout::backup::blobs_dir(target);
    visit_blob_list(backup, [&](const oci::Digest& digest, std::uint64_t size) {
        const auto from = blob_in(target_blobs, digest);
        if (!fs::exists(from)) fail(report.id + ": blob " + digest.str() + " is gone from the backup");
        bool linked = false;
        const auto to = *BackupFiles::path(blobs, digest);
        const bool existed = fs::exists(to);
        if (!place_blob(from, to, digest, linked, true))
            fail(report.id + ": blob " + digest.str() + " is damaged in the backup (berth backup verify)");
        if (!existed) placed.push_back(to);
        touched.insert(to.parent_path());
        report.linked += linked;
        ++report.blobs;
        report.bytes += size;
        if (progress && report.blobs % 1000 == 0) progress({"blobs", report.blobs, report.bytes});
    });
    sync_dirs(touched);
}

}  // namespace

RestoreReport restore_backup(const fs::path& target, const std::string& id, const fs::path& root,
                             const std::function<void(const BackupProgress&)>& progress) {
    auto ids = backup_ids(target);
    if (ids.empty()) fail(target.string() + " holds no backup");
    RestoreReport report;
    report.id = id.empty() ? ids.back() : id;
    if (std::find(ids.begin(), ids.end(), report.id) == ids.end())
        fail(target.string() + " holds no backup " + report.id);
    const auto backup = layout::backup::backup_dir(target, report.id);
    auto description = read_description(backup);
    const auto meta_dir = layout::meta_dir(root);
    std::error_code ec;
    if (fs::exists(meta_dir) && !fs::is_empty(meta_dir, ec))
        fail(root.string() + " holds a store already: restore into an empty root");
    require_whole_list(backup, report.id, description);

    // A refused restore leaves root as it found it, so it can be tried again.
    std::vector<fs::path> placed;
    std::set<fs::path> before;
    for (auto& entry : fs::directory_iterator(root, ec)) before.insert(entry.path());
    try {
        if (progress) progress({"index", 0, 0});
        restore_index(backup, report.id, description, meta_dir);
        report.blobs_in_bucket = blobs_in_bucket(description);
        if (report.blobs_in_bucket) count_listed(backup, report);
        else restore_blobs(target, backup, root, report, placed, progress);
        MetaStore meta(meta_dir);
        // The bucket holds what was pushed since, which this index does not link: garbage
        // collection must not take it for garbage (node.cpp gc_options).
        if (report.blobs_in_bucket)
            meta.put_setting(layout::setting::bucket_backup_taken,
                             std::to_string(description.at("created").get<std::int64_t>()));
        // A new log: peers that read the old one up to a sequence past this backup's head would
        // otherwise skip what this replica writes next under those numbers.
        meta.put_setting(layout::setting::log_epoch, oci::random_hex(8));
        meta.put_setting(layout::setting::peer_cursors, "{}");
        meta.sync();
    } catch (...) {
        for (auto& file : placed) fs::remove(file, ec);
        fs::remove_all(meta_dir, ec);
        for (auto& entry : fs::directory_iterator(root, ec))
            if (!before.count(entry.path())) fs::remove_all(entry.path(), ec);
        throw;
    }
    report.peers = backup_peers(target, report.id);
    if (progress) progress({"done", report.blobs, report.bytes});
    return report;
}

}  // namespace berth::storage
