#pragma once
// Fault injection for the crash tests (tests/fault/test_upload_crash_points.py):
// with BERTH_CRASH_AT=<name> in its environment, the process kills itself
// with SIGKILL when it reaches the point of that name, exactly as a power cut
// or kill -9 would stop it there. Without the variable a point costs one
// comparison of a cached flag.
//
// Points: upload.verified, blob.synced, blob.renamed, blob.dir_synced,
// upload.committed (in the order finishing an upload passes them).
#include <string_view>

namespace berth::storage {

void crash_point(std::string_view name);

}  // namespace berth::storage
