// The `storage` section: where blob bytes live (docs/storage.md). {"blobs": {"type": "files"}}
// is the default; {"type": "s3", ...} puts them in a bucket every replica shares.
#include "section.hpp"

namespace berth::config {

namespace {

void read_s3(Section& s, Reading& r, s3::StoreOptions& store) {
    auto& bucket = store.bucket;
    std::string access_key_file, secret_key_file, ca_file;
    s.string("endpoint", bucket.endpoint, false);
    s.string("bucket", bucket.bucket, false);
    s.string("prefix", store.prefix);
    s.string("region", bucket.region, false);
    s.string("access_key_file", access_key_file, false);
    s.string("secret_key_file", secret_key_file, false);
    s.string("ca_file", ca_file);
    s.boolean("path_style", bucket.path_style);
    std::uint64_t part_size_mib = bucket.part_size >> 20;
    s.number("part_size_mib", part_size_mib, 5 * 1024);
    if (part_size_mib < 5) throw ConfigError("storage.blobs.part_size_mib is 5 to 5120 (S3's limits)");
    bucket.part_size = part_size_mib << 20;
    s.number("parallel_parts", store.parallel_parts, 64);
    if (store.parallel_parts < 1) throw ConfigError("storage.blobs.parallel_parts is 1 to 64");
    s.number("cache_bytes", store.cache_bytes, UINT64_MAX);
    bool redirect = false;
    s.boolean("redirect", redirect);
    std::chrono::seconds redirect_for{300};
    s.seconds("redirect_seconds", redirect_for);
    // A URL cannot be taken back: a deleted blob or a revoked grant stays readable through it.
    if (redirect_for.count() < 1 || redirect_for > std::chrono::hours(1))
        throw ConfigError("storage.blobs.redirect_seconds is 1 to 3600");
    if (redirect) store.redirect_for = redirect_for;
    s.seconds("abandoned_upload_seconds", store.abandoned_after);
    s.seconds("abandoned_sweep_seconds", store.sweep_interval);
    // Parts go up at the bucket's pace; an upload younger than this may still be alive.
    if (store.abandoned_after < std::chrono::seconds(10))
        throw ConfigError("storage.blobs.abandoned_upload_seconds must be at least 10: a live upload is never aborted");
    if (store.sweep_interval.count() == 0) throw ConfigError("storage.blobs.abandoned_sweep_seconds must be above 0");
    if (bucket.endpoint.empty() || bucket.bucket.empty())
        throw ConfigError("storage.blobs: an s3 store needs endpoint and bucket");
    if (!store.prefix.empty() && !store.prefix.ends_with("/"))
        throw ConfigError("storage.blobs.prefix must end with / (or be empty)");
    if (access_key_file.empty() || secret_key_file.empty())
        throw ConfigError("storage.blobs: an s3 store needs access_key_file and secret_key_file");
    bucket.access_key = secret_from("storage.blobs.access_key_file", r.path_of(access_key_file));
    bucket.secret_key = secret_from("storage.blobs.secret_key_file", r.path_of(secret_key_file));
    if (!ca_file.empty()) bucket.ca_file = r.path_of(ca_file);
    try {
        net::Client probe;
        s3::Client check(bucket, probe);  // the same checks the store makes when it starts
    } catch (const std::invalid_argument& error) {
        throw ConfigError(std::string("storage.blobs: ") + error.what());
    }
}

}  // namespace

void read_storage(Section& s, Reading& r) {
    s.section("blobs", [&](Section& blobs) {
        std::string type = "files";
        blobs.string("type", type, false);
        if (type == "files") return;
        if (type != "s3") throw ConfigError("storage.blobs.type is \"files\" or \"s3\"");
        auto& store = r.config.s3_blobs.emplace();
        read_s3(blobs, r, store);
        store.renew_after = r.config.gc.grace / 2;
    });
}

}  // namespace berth::config
