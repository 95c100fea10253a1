#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <future>
#include <set>
#include <thread>
#include <system_error>

#include "berth/oci/error.hpp"
#include "berth/registry/registry.hpp"
#include "berth/storage/layout.hpp"
#include "storage/upload_buffers.hpp"
#include "storage/worker_threads.hpp"
#include "error_code.hpp"
#include "fixtures.hpp"

using namespace berth;
using oci::ErrorCode;

namespace {

// A registry on real stores in a temp dir, with a wall clock the test moves; every blob push
// checked.
struct Fixture : test::RegistryFixture {
    Fixture() : RegistryFixture({.options = options(), .start_ms = 1'000'000}) { check_pushes = true; }

    static registry::Options options() {
        auto o = test::registry_options();
        o.max_uploads = 4;
        o.max_page = 3;
        o.upload_idle_ttl = std::chrono::seconds(60);
        return o;
    }
};

std::string random_bytes(std::size_t size) {
    std::string bytes(size, '\0');
    std::uint32_t x = 12345;
    for (auto& c : bytes) c = static_cast<char>((x = x * 1103515245 + 12345) >> 24);
    return bytes;
}

// Appends content[from, end) to session `id` of repository "r", closes it, and
// checks the stored blob byte for byte.
void append_rest_and_check(Fixture& f, const std::string& id, const std::string& content, std::size_t from) {
    f.reg.append("r", id, from)->write(content.data() + from, content.size() - from);
    auto digest = oci::Digest::of(oci::DigestAlgorithm::sha256, content);
    CHECK(f.reg.finish_upload("r", id, digest.str()) == digest);
    CHECK(test::read_file(test::blob_path(f.dir.path(), digest)) == content);
}

// Makes the disk refuse writes to any file past `limit` bytes while it lives.
class FileSizeLimit {
public:
    explicit FileSizeLimit(rlim_t limit) : old_handler_(std::signal(SIGXFSZ, SIG_IGN)) {
        REQUIRE(getrlimit(RLIMIT_FSIZE, &saved_) == 0);
        rlimit small = saved_;
        small.rlim_cur = limit;
        REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
    }
    ~FileSizeLimit() {
        setrlimit(RLIMIT_FSIZE, &saved_);
        std::signal(SIGXFSZ, old_handler_);
    }
    FileSizeLimit(const FileSizeLimit&) = delete;
    FileSizeLimit& operator=(const FileSizeLimit&) = delete;

private:
    rlimit saved_{};
    void (*old_handler_)(int);
};

// A session of repository r whose file holds content, not yet finished.
std::string session_holding(Fixture& f, const std::string& content) {
    auto id = f.reg.start_upload("r").id;
    auto appender = f.reg.append("r", id, 0);
    appender->write(content.data(), content.size());
    appender->finish();
    return id;
}

// Leaves `spare` file descriptors free while it lives: every other one below a lowered limit is
// taken, so the opens after those fail with EMFILE.
class DescriptorsUsedUp {
public:
    explicit DescriptorsUsedUp(int spare) {
        REQUIRE(getrlimit(RLIMIT_NOFILE, &saved_) == 0);
        int highest = 0;
        for (auto& entry : std::filesystem::directory_iterator("/proc/self/fd"))
            highest = std::max(highest, std::stoi(entry.path().filename().string()));
        rlimit low = saved_;
        low.rlim_cur = static_cast<rlim_t>(highest) + 64;
        REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);
        for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) taken_.push_back(fd);
        REQUIRE(errno == EMFILE);
        for (int i = 0; i < spare && !taken_.empty(); ++i) {
            ::close(taken_.back());
            taken_.pop_back();
        }
    }
    ~DescriptorsUsedUp() {
        for (int fd : taken_) ::close(fd);
        setrlimit(RLIMIT_NOFILE, &saved_);
    }
    DescriptorsUsedUp(const DescriptorsUsedUp&) = delete;
    DescriptorsUsedUp& operator=(const DescriptorsUsedUp&) = delete;

private:
    rlimit saved_{};
    std::vector<int> taken_;
};

}  // namespace

TEST_CASE("a blob is visible only in the repositories it was pushed or mounted to") {
    Fixture f;
    auto digest = f.push_blob("a", "hello");
    CHECK(f.reg.stat_blob("a", digest).size == 5);
    CHECK(code_of([&] { f.reg.stat_blob("b", digest); }) == ErrorCode::blob_unknown);
    CHECK(code_of([&] { f.reg.mount_blob("b", digest, "Bad"); }) == ErrorCode::name_invalid);
    auto unmounted = f.reg.mount_blob("b", digest, "");  // no `from`: a session, never a mount
    CHECK_FALSE(unmounted.mounted);
    CHECK_FALSE(unmounted.upload_id.empty());
    auto mounted = f.reg.mount_blob("b", digest, "a");
    REQUIRE(mounted.mounted);
    CHECK(f.reg.stat_blob("b", digest).size == 5);
    f.reg.delete_blob("a", digest);
    CHECK(code_of([&] { f.reg.stat_blob("a", digest); }) == ErrorCode::blob_unknown);
    CHECK(f.reg.stat_blob("b", digest).size == 5);
    CHECK(code_of([&] { f.reg.delete_blob("a", digest); }) == ErrorCode::blob_unknown);
}

TEST_CASE("uploads check chunk offsets and digests") {
    Fixture f;
    auto session = f.reg.start_upload("r");
    f.reg.append("r", session.id, 0)->write("abc", 3);
    CHECK(code_of([&] { f.reg.append("r", session.id, 0); }) == ErrorCode::upload_range_invalid);
    {
        auto appender = f.reg.append("r", session.id, 3);
        CHECK(code_of([&] { f.reg.append("r", session.id, std::nullopt); }) == ErrorCode::upload_range_invalid);
        appender->write("def", 3);
    }
    CHECK(f.reg.upload_status("r", session.id).offset == 6);
    CHECK(code_of([&] { f.reg.upload_status("other", session.id); }) == ErrorCode::blob_upload_unknown);
    auto wrong = oci::Digest::of(oci::DigestAlgorithm::sha256, "abcdeX").str();
    CHECK(code_of([&] { f.reg.finish_upload("r", session.id, wrong); }) == ErrorCode::digest_invalid);
    CHECK(code_of([&] { f.reg.upload_status("r", session.id); }) == ErrorCode::blob_upload_unknown);
    CHECK(code_of([&] { f.reg.stat_blob("r", wrong); }) == ErrorCode::blob_unknown);
    CHECK(code_of([&] { f.reg.upload_status("r", "../../etc/passwd"); }) == ErrorCode::blob_upload_unknown);
}

TEST_CASE("large appends hashed on the hash workers give the digest of every byte in order") {
    Fixture f;
    const auto content = random_bytes(7 << 20);
    auto session = f.reg.start_upload("r");
    // Two appends, like two PATCHes: the second starts where the first ended,
    // both past the part hashed inline, in pieces that straddle the buffers.
    const std::size_t half = 3 << 20, piece = 100'003;
    for (auto [from, to] : {std::pair{std::size_t{0}, half}, std::pair{half, content.size()}}) {
        auto appender = f.reg.append("r", session.id, from);
        for (auto at = from; at < to; at += piece) appender->write(content.data() + at, std::min(piece, to - at));
        CHECK(appender->offset() == to);
    }
    CHECK(f.reg.upload_status("r", session.id).offset == content.size());
    auto digest = oci::Digest::of(oci::DigestAlgorithm::sha256, content).str();
    CHECK(f.reg.finish_upload("r", session.id, digest).str() == digest);
    CHECK(f.reg.stat_blob("r", digest).size == content.size());
}

TEST_CASE("appends of any length, at any offset, land in the file byte for byte") {
    Fixture f;
    const auto content = random_bytes(5 << 20);
    auto session = f.reg.start_upload("r");
    // Each append (a PATCH) ends off the 4 KiB grid the O_DIRECT writes keep
    // to, so the next one starts by reading back the block it ends in.
    std::size_t at = 0;
    for (std::size_t size : {1, 4095, 300'001, 262'144, 5, 1'048'577, 2'000'000}) {
        auto appender = f.reg.append("r", session.id, at);
        appender->write(content.data() + at, size);
        appender->finish();
        at += size;
        CHECK(appender->offset() == at);
    }
    append_rest_and_check(f, session.id, content, at);
}

TEST_CASE("when_stored runs off the caller's thread once every appended byte is stored, or leaves it to the caller") {
    Fixture f;
    const auto content = random_bytes(3 << 20);
    auto session = f.reg.start_upload("r");
    std::size_t at = 0;
    {
        // 3 MiB keeps the write and hash workers busy past the write() below.
        const auto size = content.size() - 1;
        auto appender = f.reg.append("r", session.id, at);
        appender->write(content.data() + at, size);
        CHECK(f.reg.upload_buffer_bytes() > 0);
        std::promise<std::thread::id> ran;
        std::function<void()> ready = [&] {
            appender->finish();  // nothing left in flight: returns at once, storing the unaligned tail
            ran.set_value(std::this_thread::get_id());
        };
        auto ran_on = ran.get_future();
        const bool in_flight = appender->when_stored(ready);
        // Seldom, the workers finish before when_stored looks: the caller runs it.
        if (!in_flight) ready();
        REQUIRE(ran_on.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
        if (in_flight) CHECK(ran_on.get() != std::this_thread::get_id());
        at += size;
        CHECK(appender->offset() == at);
    }
    {
        // 1 byte is hashed inline and leaves the workers nothing: `ready` stays the caller's.
        auto appender = f.reg.append("r", session.id, at);
        appender->write(content.data() + at, 1);
        bool ran = false;
        std::function<void()> ready = [&] { ran = true; };
        CHECK_FALSE(appender->when_stored(ready));
        REQUIRE(ready);
        CHECK_FALSE(ran);
        appender->finish();
        at += 1;
        CHECK(appender->offset() == at);
    }
    CHECK(f.reg.upload_buffer_bytes() == 0);  // given back with each appender
    append_rest_and_check(f, session.id, content, at);
}

TEST_CASE("uploads take 1 MiB buffers until all hold 32 MiB, then 256 KiB ones, one each") {
    Fixture f;
    auto options = Fixture::options();
    options.max_uploads = 64;
    registry::Registry reg(options, f.blobs, f.meta, f.clock);
    std::vector<std::unique_ptr<storage::UploadAppender>> open;
    for (int i = 0; i < 32; ++i) {
        auto session = reg.start_upload("r");
        open.push_back(reg.append("r", session.id, 0));
        CHECK(reg.upload_buffer_bytes() == static_cast<std::size_t>(i + 1) << 20);
    }
    auto session = reg.start_upload("r");
    auto late = reg.append("r", session.id, 0);
    CHECK(reg.upload_buffer_bytes() == (32u << 20) + (256u << 10));
    // Full buffers go to the disk; none beyond the first is taken while all hold 32 MiB.
    const auto content = random_bytes(3 << 20);
    late->write(content.data(), content.size());
    CHECK(reg.upload_buffer_bytes() == (32u << 20) + (256u << 10));
    late->finish();
    CHECK(late->offset() == content.size());
    late.reset();
    open.clear();
    CHECK(reg.upload_buffer_bytes() == 0);
}

TEST_CASE("upload buffers are page-aligned, and given-back ones are kept up to the limit, the rest unmapped") {
    using storage::UploadBuffers;
    constexpr std::size_t size = 256 << 10;
    UploadBuffers pool(size, 2 * size);
    CHECK(pool.buffer_bytes() == size);
    std::vector<UploadBuffers::Buffer> taken;
    for (int i = 0; i < 3; ++i) {
        taken.push_back(pool.take());
        CHECK(reinterpret_cast<std::uintptr_t>(taken.back().get()) % 4096 == 0);
        std::memset(taken.back().get(), i, size);
    }
    std::set<char*> kept{taken[0].get(), taken[1].get()};
    char* over = taken[2].get();
    taken.clear();  // the first two are kept, the third goes back to the kernel
    CHECK(::msync(over, size, MS_ASYNC) == -1);
    CHECK(errno == ENOMEM);
    auto again = pool.take();
    auto again2 = pool.take();
    CHECK(std::set<char*>{again.get(), again2.get()} == kept);
}

TEST_CASE("a failed write leaves the session at the bytes that reached the file, to be resumed") {
    Fixture f;
    const auto content = random_bytes(5 << 20);
    auto session = f.reg.start_upload("r");
    const rlim_t limit = (2 << 20) + 1000;
    {
        FileSizeLimit refuse_past(limit);
        auto appender = f.reg.append("r", session.id, 0);
        SECTION("reported by a later commit or, at the latest, by finish") {
            CHECK_THROWS_AS((appender->write(content.data(), content.size()), appender->finish()), std::system_error);
        }
        SECTION("reported by finish() inside when_stored's task") {
            try {
                appender->write(content.data(), content.size());
            } catch (const std::system_error&) {
                // a later commit saw it first; finish() must report it all the same
            }
            std::promise<bool> reported;
            std::function<void()> ready = [&] {
                try {
                    appender->finish();
                    reported.set_value(false);
                } catch (const std::system_error&) {
                    reported.set_value(true);
                }
            };
            auto outcome = reported.get_future();
            if (!appender->when_stored(ready)) ready();  // nothing was in flight any more
            REQUIRE(outcome.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
            CHECK(outcome.get());
        }
    }
    const auto kept = f.reg.upload_status("r", session.id).offset;
    CHECK(kept <= limit);
    append_rest_and_check(f, session.id, content, kept);
}

TEST_CASE("a session hashed in sha256 can be closed with a sha512 digest") {
    Fixture f;
    auto session = f.reg.start_upload("r");
    f.reg.append("r", session.id, 0)->write("data", 4);
    auto sha512 = oci::Digest::of(oci::DigestAlgorithm::sha512, "data").str();
    CHECK(f.reg.finish_upload("r", session.id, sha512).str() == sha512);
    CHECK(f.reg.stat_blob("r", sha512).size == 4);
}

TEST_CASE("upload sessions are capped and idle ones purged") {
    Fixture f;
    std::vector<std::string> ids;
    for (int i = 0; i < 4; ++i) ids.push_back(f.reg.start_upload("r").id);
    CHECK(code_of([&] { f.reg.start_upload("r"); }) == ErrorCode::too_many_requests);
    f.now_ms += 30'000;
    f.reg.append("r", ids[0], 0)->write("x", 1);  // activity keeps a session
    f.now_ms += 40'000;
    CHECK(f.reg.purge_idle_uploads() == 3);
    CHECK(f.reg.upload_status("r", ids[0]).offset == 1);
    CHECK(code_of([&] { f.reg.upload_status("r", ids[1]); }) == ErrorCode::blob_upload_unknown);
    CHECK(std::distance(std::filesystem::directory_iterator(test::scratch_dir(f.dir.path())), {}) == 1);
}

TEST_CASE("a DELETE ends a session a stalled append still holds") {
    Fixture f;
    auto id = f.reg.start_upload("r").id;
    auto scratch_files = [&] {
        return std::distance(std::filesystem::directory_iterator(test::scratch_dir(f.dir.path())), {});
    };
    {
        auto appender = f.reg.append("r", id, 0);
        appender->write("abc", 3);
        CHECK(code_of([&] { f.reg.upload_status("r", id); }) == ErrorCode::upload_range_invalid);
        f.reg.cancel_upload("r", id);
        CHECK(code_of([&] { f.reg.upload_status("r", id); }) == ErrorCode::blob_upload_unknown);
        CHECK(scratch_files() == 0);  // its bytes wait in a buffer: a file is made only to store them
    }
    CHECK(scratch_files() == 0);
    CHECK(f.reg.uploads_in_progress() == 0);
    CHECK(code_of([&] { f.reg.cancel_upload("r", id); }) == ErrorCode::blob_upload_unknown);
}

TEST_CASE("a session opens in memory, makes its file where its first bytes are stored, and is recorded once kept") {
    Fixture f;
    auto scratch_files = [&] {
        return std::distance(std::filesystem::directory_iterator(test::scratch_dir(f.dir.path())), {});
    };
    auto id = f.reg.start_upload("r").id;
    CHECK(scratch_files() == 0);
    CHECK(f.meta.uploads().empty());
    // Without may_block (an I/O thread): the status of a session with no file is known, and an
    // append may begin there: the file is made by the appender, off that thread, not by planning.
    CHECK(f.reg.upload_status("r", id, false).offset == 0);
    {
        auto appender = f.reg.append("r", id, 0, false);
        CHECK(scratch_files() == 0);
        appender->write("abc", 3);
        appender->finish();  // a worker's: the tail is stored, the file made for it
        CHECK(scratch_files() == 1);
    }
    CHECK(f.meta.uploads().empty());                    // bytes appended, none acknowledged yet
    CHECK(f.reg.append("r", id, 3, false) != nullptr);  // its file exists: opened where planned
    CHECK(f.reg.keep_upload("r", id));
    CHECK(f.meta.uploads().size() == 1);
    CHECK(f.reg.keep_upload("r", id));  // once
    CHECK(f.meta.uploads().size() == 1);
    f.reg.finish_upload("r", id, test::digest_of("abc"));
    CHECK(f.meta.uploads().empty());
    CHECK_FALSE(f.reg.keep_upload("r", id));
}

TEST_CASE("a session whose digest state must be rebuilt is not taken up where nothing may block") {
    Fixture f;
    const auto content = random_bytes(3 << 20);
    auto id = f.reg.start_upload("r").id;
    {
        FileSizeLimit refuse_past((1 << 20) + 1000);
        auto appender = f.reg.append("r", id, 0);
        try {
            appender->write(content.data(), content.size());
            appender->finish();
        } catch (const std::system_error&) {
            // the write past the limit fails: what this test is about
        }
    }
    // The failed write dropped the digest state: rebuilding it reads every byte of the file.
    CHECK_THROWS_AS(f.reg.upload_status("r", id, false), registry::WouldBlock);
    CHECK_THROWS_AS(f.reg.append("r", id, std::nullopt, false), registry::WouldBlock);
    const auto kept = f.reg.upload_status("r", id).offset;  // a worker rebuilds it
    CHECK(f.reg.upload_status("r", id, false).offset == kept);
}

TEST_CASE("an append that does not start at the session's end is refused before any file is made") {
    Fixture f;
    auto id = f.reg.start_upload("r").id;
    // Planned on an I/O thread: nothing there may make a file, not even while refusing.
    CHECK(code_of([&] { f.reg.append("r", id, 5, false); }) == ErrorCode::upload_range_invalid);
    CHECK(std::filesystem::is_empty(test::scratch_dir(f.dir.path())));
    auto appender = f.reg.append("r", id, 0, false);  // not left held by the refusal
    appender->write("abc", 3);
    appender->finish();
}

TEST_CASE("an acknowledged append of no bytes still leaves the session a file to resume from") {
    Fixture f;
    auto id = f.reg.start_upload("r").id;
    f.reg.append("r", id, 0, false)->finish();
    CHECK(f.reg.keep_upload("r", id));
    // After a restart the recorded session is taken up from its file: there must be one.
    registry::Registry again(Fixture::options(), f.blobs, f.meta, f.clock);
    CHECK(again.upload_status("r", id).offset == 0);
    auto appender = again.append("r", id, 0);
    appender->write("abc", 3);
    appender->finish();
    appender.reset();
    CHECK(again.finish_upload("r", id, test::digest_of("abc")).str() == test::digest_of("abc"));
}

TEST_CASE("a file that cannot be made fails the append, and the session starts again from nothing") {
    Fixture f;
    auto id = f.reg.start_upload("r").id;
    const auto file = storage::layout::upload_file(test::scratch_dir(f.dir.path()), id);
    std::filesystem::create_directory(file);  // where the file goes: taken, so creating it fails
    {
        auto appender = f.reg.append("r", id, 0, false);
        appender->write("abc", 3);
        CHECK_THROWS_AS(appender->finish(), std::system_error);
    }
    std::filesystem::remove(file);
    CHECK(f.reg.upload_status("r", id, false).offset == 0);
    auto appender = f.reg.append("r", id, 0, false);
    appender->write("xyz", 3);
    appender->finish();
    appender.reset();
    CHECK(f.reg.finish_upload("r", id, test::digest_of("xyz")).str() == test::digest_of("xyz"));
}

TEST_CASE("a blob that cannot be committed to disk ends its session: a retried PUT cannot trust the bytes") {
    Fixture f;
    const std::string content = "bytes whose commit fails";
    const auto digest = test::digest_of(content);
    auto id = session_holding(f, content);
    CHECK(f.reg.keep_upload("r", id));
    // The blob's prefix directory is a file: the rename into place fails with ENOTDIR.
    const auto prefix =
        storage::layout::blob_file(storage::layout::blobs_dir(f.dir.path()), *oci::Digest::parse(digest)).parent_path();
    std::filesystem::remove(prefix);  // made empty at start
    { std::ofstream(prefix) << "in the way"; }
    CHECK_THROWS_AS(f.reg.finish_upload("r", id, digest), std::system_error);
    CHECK(code_of([&] { f.reg.finish_upload("r", id, digest); }) == ErrorCode::blob_upload_unknown);
    CHECK(f.meta.uploads().empty());
    CHECK(std::filesystem::is_empty(test::scratch_dir(f.dir.path())));
}

TEST_CASE("draining worker threads waits for what is queued and what runs") {
    storage::WorkerThreads workers(1);
    std::promise<void> release;
    auto released = release.get_future().share();
    std::atomic<int> ran = 0;
    workers.post([released, &ran] {
        released.wait();
        ++ran;
    });
    workers.post([&ran] { ++ran; });  // queued behind the first
    auto drained = std::async(std::launch::async, [&] { workers.drain(); });
    CHECK(drained.wait_for(std::chrono::milliseconds(100)) == std::future_status::timeout);
    release.set_value();
    REQUIRE(drained.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
    CHECK(ran == 2);
    workers.drain();  // idle: returns at once
}

TEST_CASE("a shortage of descriptors after the blob was renamed into place ends its session too") {
    Fixture f;
    const std::string content = "bytes renamed, then their directory cannot be opened";
    const auto digest = test::digest_of(content);
    auto id = session_holding(f, content);
    const auto blob = storage::layout::blob_file(storage::layout::blobs_dir(f.dir.path()), *oci::Digest::parse(digest));
    std::filesystem::create_directories(blob.parent_path());
    {
        // The upload file's open takes the spare descriptor; the directory's fsync finds none.
        DescriptorsUsedUp used_up(1);
        CHECK_THROWS_AS(f.reg.finish_upload("r", id, digest), std::system_error);
    }
    CHECK(std::filesystem::exists(blob));  // renamed: the session's file is gone, nothing to retry with
    CHECK(code_of([&] { f.reg.finish_upload("r", id, digest); }) == ErrorCode::blob_upload_unknown);
    // The client uploads again: the blob already there is renewed, its directory synced.
    auto again = session_holding(f, content);
    CHECK(f.reg.finish_upload("r", again, digest).str() == digest);
}

TEST_CASE("one client cannot hold every upload session") {
    Fixture f;
    registry::Options options = Fixture::options();
    options.max_uploads_per_client = 2;
    registry::Registry reg(options, f.blobs, f.meta, f.clock);
    reg.start_upload("r", "", "ip:1");
    reg.start_upload("r", "", "ip:1");
    CHECK(code_of([&] { reg.start_upload("r", "", "ip:1"); }) == ErrorCode::too_many_requests);
    CHECK_FALSE(reg.start_upload("r", "", "ip:2").id.empty());
}

TEST_CASE("uploads stop before the disk is full") {
    Fixture f;
    registry::Options options = Fixture::options();
    options.min_free_bytes = UINT64_MAX;  // nothing is ever enough
    registry::Registry reg(options, f.blobs, f.meta, f.clock);
    CHECK(code_of([&] { reg.start_upload("r"); }) == ErrorCode::insufficient_storage);
}

TEST_CASE("manifests need their blobs, keep their bytes, and move tags") {
    Fixture f;
    auto body = f.image("r", "1");
    CHECK(code_of([&] { f.reg.put_manifest("other", "v1", "", body); }) == ErrorCode::manifest_blob_unknown);
    auto result = f.reg.put_manifest("r", "v1", "application/vnd.oci.image.manifest.v1+json", body, {"x", "y"});
    CHECK(result.tags == std::vector<std::string>{"v1", "x", "y"});
    auto by_tag = f.reg.get_manifest("r", "v1");
    CHECK(by_tag.bytes == body);
    CHECK(by_tag.digest == result.digest);
    CHECK(f.reg.get_manifest("r", result.digest.str()).media_type == "application/vnd.oci.image.manifest.v1+json");

    CHECK(code_of([&] { f.reg.get_manifest("r", ".INVALID"); }) == ErrorCode::manifest_unknown);
    CHECK(code_of([&] { f.reg.put_manifest("r", ".INVALID", "", body); }) == ErrorCode::tag_invalid);
    CHECK(code_of([&] { f.reg.get_manifest("nope", "v1"); }) == ErrorCode::name_unknown);
    auto wrong_digest = oci::Digest::of(oci::DigestAlgorithm::sha256, "x").str();
    CHECK(code_of([&] { f.reg.put_manifest("r", wrong_digest, "", body); }) == ErrorCode::digest_invalid);

    auto body2 = f.image("r", "2");
    auto second = f.reg.put_manifest("r", "v1", "", body2);
    CHECK(f.reg.get_manifest("r", "v1").digest == second.digest);
}

TEST_CASE("an index needs its child manifests") {
    Fixture f;
    auto child = f.reg.put_manifest("r", "child", "", f.image("r", "c"));
    auto size = f.reg.get_manifest("r", "child").bytes.size();
    auto index = [&](const std::string& digest) { return test::index_manifest(digest, size); };
    CHECK(code_of([&] { f.reg.put_manifest("r", "i", "", index("sha256:" + std::string(64, 'e'))); }) ==
          ErrorCode::manifest_blob_unknown);
    f.reg.put_manifest("r", "i", "", index(child.digest.str()));
    CHECK(f.reg.get_manifest("r", "i").media_type == "application/vnd.oci.image.index.v1+json");
}

TEST_CASE("repositories set sparse accept manifests without their blobs and children, but not wrong sizes") {
    auto options = Fixture::options();
    options.sparse_manifests = {"cache/**"};
    Fixture f;
    registry::Registry reg(options, f.blobs, f.meta, f.clock, {}, [&f] { return f.now_ms; });
    auto absent = "sha256:" + std::string(64, 'e');
    auto image = [](const std::string& layer, std::size_t size) {
        return test::image_manifest({"application/vnd.oci.empty.v1+json", layer, size}, {});
    };
    CHECK(code_of([&] { reg.put_manifest("other", "v1", "", image(absent, 5)); }) == ErrorCode::manifest_blob_unknown);
    auto sparse = reg.put_manifest("cache/a/b", "v1", "", image(absent, 5));
    CHECK(reg.get_manifest("cache/a/b", "v1").digest == sparse.digest);

    auto held = f.push_blob("cache/a/b", "held");
    CHECK(code_of([&] { reg.put_manifest("cache/a/b", "v2", "", image(held, 99)); }) == ErrorCode::manifest_invalid);
    reg.put_manifest("cache/a/b", "v2", "", image(held, 4));

    auto index = test::index_manifest(absent, 9);
    CHECK(code_of([&] { reg.put_manifest("other", "i", "", index); }) == ErrorCode::manifest_blob_unknown);
    reg.put_manifest("cache/a/b", "i", "", index);
}

TEST_CASE("deleting a manifest removes it, its tags and its referrer entry") {
    Fixture f;
    auto subject = "sha256:" + std::string(64, 'c');
    auto referrer = f.reg.put_manifest("r", "ref", "", f.image("r", "s", subject));
    CHECK(referrer.subject == subject);
    CHECK(f.reg.referrers("r", subject, "").find(referrer.digest.str()) != std::string::npos);
    CHECK(f.reg.referrers("r", subject, "application/vnd.example.config").find(referrer.digest.str()) !=
          std::string::npos);
    CHECK(f.reg.referrers("r", subject, "other/type").find(referrer.digest.str()) == std::string::npos);
    CHECK(f.reg.referrers("elsewhere", subject, "").find(referrer.digest.str()) == std::string::npos);

    f.reg.delete_manifest("r", referrer.digest.str());
    CHECK(code_of([&] { f.reg.get_manifest("r", "ref"); }) == ErrorCode::manifest_unknown);
    CHECK(code_of([&] { f.reg.get_manifest("r", referrer.digest.str()); }) == ErrorCode::manifest_unknown);
    CHECK(f.reg.referrers("r", subject, "").find(referrer.digest.str()) == std::string::npos);
    CHECK(code_of([&] { f.reg.delete_manifest("r", referrer.digest.str()); }) == ErrorCode::manifest_unknown);
    // Pushing it again after a delete works.
    f.reg.put_manifest("r", "again", "", f.image("r", "s", subject));
    CHECK(f.reg.get_manifest("r", "again").digest == referrer.digest);
}

TEST_CASE("deleting a tag keeps the manifest") {
    Fixture f;
    auto pushed = f.reg.put_manifest("r", "a", "", f.image("r", "t"), {"b"});
    f.reg.delete_manifest("r", "a");
    CHECK(code_of([&] { f.reg.get_manifest("r", "a"); }) == ErrorCode::manifest_unknown);
    CHECK(f.reg.get_manifest("r", "b").digest == pushed.digest);
    CHECK(f.reg.list_tags("r", std::nullopt, "").items == std::vector<std::string>{"b"});
}

TEST_CASE("tag lists page in byte order and clamp n") {
    Fixture f;
    auto body = f.image("r", "p");
    f.reg.put_manifest("r", "d", "", body, {"b", "a", "C", "c"});
    auto page = f.reg.list_tags("r", 2, "");
    CHECK(page.items == std::vector<std::string>{"C", "a"});
    CHECK(page.more);
    page = f.reg.list_tags("r", 2, "a");
    CHECK(page.items == std::vector<std::string>{"b", "c"});
    CHECK(page.more);
    page = f.reg.list_tags("r", 1000000, "");  // clamped to max_page = 3
    CHECK(page.items.size() == 3);
    CHECK(page.more);
    CHECK(f.reg.list_tags("r", 0, "").items.empty());
    CHECK(code_of([&] { f.reg.list_tags("missing", 1, ""); }) == ErrorCode::name_unknown);
    CHECK(f.reg.catalog(std::nullopt, "").items == std::vector<std::string>{"r"});
}

TEST_CASE("deletes can be disabled") {
    Fixture f;
    registry::Options options = Fixture::options();
    options.deletes_enabled = false;
    registry::Registry reg(options, f.blobs, f.meta, f.clock);
    auto digest = f.push_blob("r", "x");
    CHECK(code_of([&] { reg.delete_blob("r", digest); }) == ErrorCode::unsupported);
}

TEST_CASE("manifests over the size limit are refused") {
    Fixture f;
    CHECK(code_of([&] { f.reg.put_manifest("r", "big", "", std::string(5 << 20, ' ')); }) ==
          ErrorCode::payload_too_large);
}

TEST_CASE("an attachment is what no runtime can run, whatever its tags or fields say") {
    Fixture f;
    const std::string image_config = "application/vnd.oci.image.config.v1+json";
    const std::string tar_layer = "application/vnd.oci.image.layer.v1.tar+gzip";
    const std::string simple_signing = "application/vnd.dev.cosign.simplesigning.v1+json";
    auto descriptor = [&](const std::string& type, const std::string& content) {
        return R"({"mediaType":")" + type + R"(","digest":")" + f.push_blob("a/b", content) + R"(","size":)" +
               std::to_string(content.size()) + "}";
    };
    auto attachment = [&](const std::string& config_type,
                          const std::vector<std::pair<std::string, std::string>>& layers,
                          const std::string& extra = "") {
        std::string body = R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":)" +
                           descriptor(config_type, "{}") + R"(,"layers":[)";
        for (std::size_t i = 0; i < layers.size(); ++i)
            body += (i ? "," : "") + descriptor(layers[i].first, layers[i].second);
        body += "]" + extra + "}";
        const auto digest = oci::Digest::of(oci::DigestAlgorithm::sha256, body);
        return f.reg.attachment(digest, oci::parse_manifest(body, "application/vnd.oci.image.manifest.v1+json"));
    };
    const std::string tar("layer.tar\0\0\0ustar", 15);
    const std::string subject =
        R"(,"subject":{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:)" +
        std::string(64, 'a') + R"(","size":2})";

    // What a runtime can run: an image config and a layer, whatever is added to it.
    CHECK_FALSE(attachment(image_config, {{tar_layer, tar}}));
    CHECK_FALSE(attachment(image_config, {{tar_layer, tar}}, subject));
    CHECK_FALSE(attachment(image_config, {{tar_layer, tar}}, R"(,"artifactType":"application/spdx+json")"));
    CHECK_FALSE(attachment("application/vnd.cncf.helm.config.v1+json", {{tar_layer, tar}}));  // a layer is a layer
    CHECK_FALSE(attachment(image_config, {}));
    // Tar bytes labelled as a signature are not one; a signature's JSON is.
    CHECK_FALSE(attachment(image_config, {{simple_signing, tar}}, subject));
    CHECK(attachment(image_config, {{simple_signing, R"({"critical":{}})"}}));
    CHECK_FALSE(attachment(image_config, {{simple_signing, R"({"critical":{}})"}, {simple_signing, tar}}));
    CHECK_FALSE(attachment(image_config, {{simple_signing, "{" + std::string(70000, ' ') + "}"}}));  // over 64 KiB
    // The image-spec's artifacts: a config that is no image's, and no layer a runtime unpacks.
    CHECK(attachment("application/vnd.oci.empty.v1+json", {{"application/spdx+json", "{}"}}, subject));
    CHECK(attachment("application/vnd.cncf.helm.config.v1+json",
                     {{"application/vnd.cncf.helm.chart.content.v1.tar+gzip", tar}}));

    const std::string index =
        R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]})";
    CHECK_FALSE(f.reg.attachment(oci::Digest::of(oci::DigestAlgorithm::sha256, index),
                                 oci::parse_manifest(index, "application/vnd.oci.image.index.v1+json")));
}
