#include "berth/s3/blob_store.hpp"

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "berth/net/client.hpp"
#include "berth/oci/error.hpp"
#include "berth/observe/log.hpp"
#include "berth/observe/metrics.hpp"
#include "berth/storage/blob_hash.hpp"
#include "berth/storage/crash_points.hpp"
#include "berth/storage/layout.hpp"
#include "object_source.hpp"

namespace berth::s3 {
namespace {

net::ClientOptions client_options(const StoreOptions& options) {
    net::ClientOptions out;
    out.io_threads = 2;
    out.max_idle_per_origin = 16 + options.parallel_parts;
    return out;
}

// What a client is told when the bucket fails a push or a read: a 503 it may retry, without the
// bucket's name or keys (the log has those).
[[noreturn]] void bucket_failed(const Error& error, const char* doing) {
    observe::log("warning", "the bucket failed a request", {{"doing", doing}, {"error", error.what()}});
    throw oci::Error(oci::ErrorCode::unavailable, std::string("the blob store failed ") + doing + "; try again");
}

}  // namespace

S3BlobStore::S3BlobStore(const std::filesystem::path& root, StoreOptions options, storage::StoreUse use)
    : BlobStore(root, use), options_(std::move(options)),
      http_(std::make_unique<net::Client>(client_options(options_))), client_(options_.bucket, *http_) {
    if (options_.parallel_parts < 1 || options_.parallel_parts > 64)
        throw std::invalid_argument("storage.blobs.parallel_parts is 1 to 64");
    if (options_.cache_bytes)
        cache_ = std::make_unique<storage::BlobCache>(storage::layout::blob_cache_dir(root), options_.cache_bytes);
    if (options_.bucket.endpoint.starts_with("http://"))
        observe::log("warning",
                     "storage.blobs.endpoint is plain http: blob bytes and requests cross the network "
                     "unencrypted (reads the cache does not serve are verified only when whole)",
                     {{"endpoint", options_.bucket.endpoint}});
}

S3BlobStore::~S3BlobStore() = default;

std::string S3BlobStore::key(const oci::Digest& digest) const {
    return options_.prefix + storage::layout::blob_key(digest);
}

std::optional<oci::Digest> S3BlobStore::digest_of(const std::string& key) const {
    const auto blobs = options_.prefix + "blobs/";
    if (!key.starts_with(blobs)) return std::nullopt;
    const auto rest = key.substr(blobs.size());
    const auto slash = rest.find('/');
    if (slash == std::string::npos) return std::nullopt;
    auto digest = oci::Digest::parse(rest.substr(0, slash) + ":" + rest.substr(slash + 1));
    if (!digest || key != this->key(*digest)) return std::nullopt;
    return digest;
}

std::optional<std::uint64_t> S3BlobStore::size(const oci::Digest& digest) const {
    if (cache_)
        if (auto cached = cache_->open(digest)) return cached->size();
    try {
        auto info = client_.head(key(digest));
        if (!info) return std::nullopt;
        return info->size;
    } catch (const Error& error) {
        bucket_failed(error, "to look a blob up");
    }
}

std::optional<storage::OpenBlob> S3BlobStore::open(const oci::Digest& digest) const {
    if (cache_)
        if (auto cached = cache_->open(digest)) return cached;
    const auto object = key(digest);
    std::optional<ObjectInfo> info;
    try {
        info = client_.head(object);
    } catch (const Error& error) {
        bucket_failed(error, "to read a blob");
    }
    if (!info) return std::nullopt;
    // A blob small enough for the cache comes in whole and verified, then goes out with sendfile.
    if (cache_ && info->size <= cache_->capacity() / 8) try {
            return cache_->fill(digest, info->size, [&](const storage::BlobCache::Sink& sink) {
                client_.get(object, 0, info->size, sink);
            });
        } catch (const Error& error) {
            bucket_failed(error, "to read a blob");
        } catch (const std::system_error& error) {
            // The cache's disk refused it (full): the bucket still has it, streamed.
            observe::log("warning", "could not fill the blob cache", {{"error", error.what()}});
        }
    return storage::OpenBlob(std::make_shared<ObjectSource>(client_, object, digest, info->size), info->size);
}

std::optional<std::string> S3BlobStore::redirect(const oci::Digest& digest) const {
    if (!options_.redirect_for.count() || (cache_ && cache_->open(digest))) return std::nullopt;
    return client_.presign_get(key(digest), options_.redirect_for);
}

std::optional<storage::OpenBlob> S3BlobStore::open_stored(const oci::Digest& digest) const {
    const auto object = key(digest);
    auto info = client_.head(object);
    if (!info) return std::nullopt;
    return storage::OpenBlob(std::make_shared<ObjectSource>(client_, object, digest, info->size), info->size);
}

void S3BlobStore::commit(const std::filesystem::path& scratch, const oci::Digest& digest, int /*scratch_fd*/) {
    const auto object = key(digest);
    auto bytes = open_scratch(scratch);
    try {
        if (!renew_if_whole(object, bytes.size())) {
            upload(bytes, object);
            storage::crash_point("blob.uploaded");
            // This process's GC may have seen an old object of this digest and deleted it while the
            // upload landed (its HEAD and DELETE hold the lock): checked under the lock, it is there.
            std::lock_guard lock(collect_mutex_);
            if (!client_.head(object)) upload(bytes, object);
        }
    } catch (const Error& error) {
        bucket_failed(error, "to store a blob");
    }
    if (cache_) cache_->admit(scratch, digest);
    drop_scratch(scratch);
}

bool S3BlobStore::adopt(const storage::OpenBlob& blob, const oci::Digest& digest) {
    const auto object = key(digest);
    if (auto info = client_.head(object); info && info->size == blob.size()) return false;
    upload(blob, object);
    std::lock_guard lock(collect_mutex_);  // as commit: GC may have taken an old one meanwhile
    if (!client_.head(object)) upload(blob, object);
    return true;
}

// A large blob the bucket holds already (pushed through another replica, or before) is renewed
// rather than sent again, so that garbage collection's grace counts from now, as the files
// store's touch does. A small one is sent again: that also mends an object damaged behind
// berth's back, which a copy would keep.
bool S3BlobStore::renew_if_whole(const std::string& object, std::uint64_t size) {
    if (size <= options_.bucket.part_size || size > (5ull << 30)) return false;  // S3 copies at most 5 GiB
    std::lock_guard lock(collect_mutex_);
    auto info = client_.head(object);
    if (!info || info->size != size) return false;
    try {
        client_.copy(object, object);
    } catch (const Error& error) {
        if (error.code() == "NoSuchKey") return false;  // gone since the HEAD
        throw;
    }
    ++renewed_;
    return true;
}

void S3BlobStore::upload(const storage::OpenBlob& bytes, const std::string& object) {
    if (bytes.size() > options_.bucket.part_size) {
        upload_parts(bytes, object);
    } else {
        std::string whole(bytes.size(), '\0');
        if (bytes.read(0, whole) != whole.size()) throw std::runtime_error("a scratch file ended early");
        client_.put(object, whole);
    }
    ++objects_uploaded_;
    bytes_uploaded_ += bytes.size();
}

bool S3BlobStore::remove(const oci::Digest& digest) {
    if (cache_) cache_->drop(digest);
    if (!client_.head(key(digest))) return false;
    client_.remove(key(digest));
    return true;
}

bool S3BlobStore::touch(const oci::Digest& digest) {
    // Renewed only once it is older than renew_after, not at every replicated link: a copy onto
    // itself costs the bucket the blob's bytes.
    std::lock_guard lock(collect_mutex_);
    const auto object = key(digest);
    std::optional<ObjectInfo> info;
    try {
        info = client_.head(object);
    } catch (const Error& error) {
        bucket_failed(error, "to look a blob up");
    }
    if (!info) return false;
    // S3 copies at most 5 GiB in one request: a larger object keeps its age.
    if (info->last_modified < std::chrono::system_clock::now() - options_.renew_after && info->size <= (5ull << 30)) {
        try {
            client_.copy(object, object);
            ++renewed_;
        } catch (const Error& error) {
            if (error.code() == "NoSuchKey") return false;
            // Present all the same: a renewal that failed must not fail the link (a replicated
            // event retried for ever); the next link renews it.
            observe::log("warning", "could not renew a blob in the bucket",
                         {{"digest", digest.str()}, {"error", error.what()}});
        }
    }
    return true;
}

bool S3BlobStore::remove_if_older(const oci::Digest& digest, std::chrono::system_clock::time_point cutoff) {
    std::lock_guard lock(collect_mutex_);
    auto info = client_.head(key(digest));
    if (!info || info->last_modified >= cutoff) return false;
    if (cache_) cache_->drop(digest);
    client_.remove(key(digest));
    return true;
}

bool S3BlobStore::quarantine(const oci::Digest& digest) {
    const auto object = key(digest);
    client_.copy(object, options_.prefix + storage::layout::quarantine_key(digest));
    if (mend(digest)) return true;
    client_.remove(object);
    return false;
}

bool S3BlobStore::mend(const oci::Digest& digest) {
    if (!cache_) return false;
    auto cached = cache_->open(digest);
    if (!cached) return false;
    // Verified when it was filled; verified again, since it is about to be the only copy.
    if (auto hashed = storage::hash(*cached, digest.algorithm()); !hashed || hashed->digest != digest) {
        cache_->drop(digest);
        return false;
    }
    upload(*cached, key(digest));
    return true;
}

void S3BlobStore::for_each(
    const std::function<void(const oci::Digest&, std::uint64_t size, std::int64_t mtime)>& visit) const {
    std::string next;
    do {
        auto page = client_.list(options_.prefix + "blobs/", next);
        for (auto& object : page.objects)
            if (auto digest = digest_of(object.key))
                visit(*digest, object.size, std::chrono::system_clock::to_time_t(object.last_modified));
        if (page.truncated && page.next_continuation_token == next)
            throw std::runtime_error("the bucket's listing does not advance");  // or it would never end
        next = page.truncated ? page.next_continuation_token : std::string();
    } while (!next.empty());
}

std::size_t S3BlobStore::abort_abandoned() {
    const auto cutoff = std::chrono::system_clock::now() - options_.abandoned_after;
    std::size_t aborted = 0;
    UploadMarkers after;
    do {
        auto page = client_.list_multipart_uploads(options_.prefix, after);
        for (auto& upload : page.uploads) {
            if (upload.initiated >= cutoff || !digest_of(upload.key)) continue;  // live, or not berth's
            client_.abort_multipart(upload.key, upload.upload_id);
            ++aborted;
            observe::log("info", "aborted an abandoned multipart upload",
                         {{"key", upload.key}, {"upload_id", upload.upload_id}});
        }
        UploadMarkers next =
            page.truncated ? UploadMarkers{page.next_key_marker, page.next_upload_id_marker} : UploadMarkers{};
        if (page.truncated && next.key_marker == after.key_marker && next.upload_id_marker == after.upload_id_marker)
            throw std::runtime_error("the bucket's listing of uploads does not advance");
        after = next;
    } while (!after.key_marker.empty());
    uploads_aborted_ += aborted;
    return aborted;
}

S3BlobStore::Stats S3BlobStore::stats() const {
    Stats out{objects_uploaded_, bytes_uploaded_, multipart_uploads_, uploads_aborted_, renewed_, 0, 0, 0, 0, 0};
    if (cache_) {
        out.cache_hits = cache_->hits();
        out.cache_misses = cache_->misses();
        out.cache_evictions = cache_->evictions();
        out.cache_bytes = cache_->bytes();
        out.cache_capacity = cache_->capacity();
    }
    return out;
}

void S3BlobStore::write_metrics(observe::MetricsWriter& out) const {
    using observe::Metric;
    const auto s = stats();
    out.add(Metric::s3_objects_uploaded_total, static_cast<double>(s.objects_uploaded));
    out.add(Metric::s3_uploaded_bytes_total, static_cast<double>(s.bytes_uploaded));
    out.add(Metric::s3_multipart_uploads_total, static_cast<double>(s.multipart_uploads));
    out.add(Metric::s3_abandoned_uploads_aborted_total, static_cast<double>(s.uploads_aborted));
    out.add(Metric::s3_blobs_renewed_total, static_cast<double>(s.renewed));
    out.add(Metric::s3_cache_requests_total, {{"result", "hit"}}, static_cast<double>(s.cache_hits));
    out.add(Metric::s3_cache_requests_total, {{"result", "miss"}}, static_cast<double>(s.cache_misses));
    out.add(Metric::s3_cache_evictions_total, static_cast<double>(s.cache_evictions));
    out.add(Metric::s3_cache_bytes, {{"kind", "used"}}, static_cast<double>(s.cache_bytes));
    out.add(Metric::s3_cache_bytes, {{"kind", "capacity"}}, static_cast<double>(s.cache_capacity));
}

}  // namespace berth::s3
