#pragma once
// storage.blobs {"type": "s3", ...}: blob bytes in a bucket every replica of a cluster shares
// (docs/storage.md). The index stays on each replica's disk, replicated as ever.
#include <chrono>
#include <cstdint>
#include <string>

#include "berth/s3/client.hpp"

namespace berth::s3 {

struct StoreOptions {
    Config bucket;                           // endpoint, bucket, region, credentials, ca_file, path_style, part_size
    std::string prefix;                      // every key under it: <prefix>blobs/<alg>/<hex>
    unsigned parallel_parts = 4;             // parts of one multipart upload in flight at once
    std::uint64_t cache_bytes = 1ull << 30;  // the read cache on the replica's disk; 0: none
    // Multipart uploads begun this long ago and neither completed nor aborted (a replica died
    // mid-push) are aborted by the sweep, which runs every sweep_interval.
    std::chrono::seconds abandoned_after{std::chrono::hours(24)};
    std::chrono::seconds sweep_interval{std::chrono::hours(1)};
    // Non-zero: a client's GET of a blob the cache does not hold is answered 307 to a presigned URL
    // of its object, valid this long, so the bytes come from the bucket, not through the replica.
    std::chrono::seconds redirect_for{0};
    // A blob linked again (a mount, a replicated link) whose object is older than this is renewed
    // (copied onto itself), so garbage collection's grace counts from the link: gc.grace / 2.
    std::chrono::seconds renew_after{std::chrono::minutes(30)};
};

}  // namespace berth::s3
