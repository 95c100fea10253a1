#!/usr/bin/env bash
# Builds berth and its tests with AddressSanitizer + UndefinedBehaviorSanitizer
# (gcc, Debug, -DBERTH_SANITIZE=ON) in build-asan, and runs the unit,
# integration, conformance and fault tests against that build. Fails on a test
# failure or on any sanitizer report, including one from a server that a test
# started (those go to build-asan/sanitizer-logs, see tests/CMakeLists.txt).
#
#   tests/sanitizers/run.sh [extra ctest arguments...]
#   SANITIZE_BUILD_DIR=... (default <repo>/build-asan), SANITIZE_JOBS=2,
#   SANITIZE_TESTS='unit|integration|conformance|fault' (the ctest -R regex)
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
build="${SANITIZE_BUILD_DIR:-$repo/build-asan}"
jobs="${SANITIZE_JOBS:-2}"
tests="${SANITIZE_TESTS:-unit|integration|conformance|fault}"

cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DBERTH_SANITIZE=ON >/dev/null
cmake --build "$build" -j"$jobs"

# A Debug ASan server is several times slower: the bootstrap fault test fills
# fewer manifests (its bootstraps are still long enough to interrupt).
export BERTH_BOOTSTRAP_MANIFESTS="${BERTH_BOOTSTRAP_MANIFESTS:-4000}"

logs="$build/sanitizer-logs"
rm -rf "$logs"
mkdir -p "$logs"
status=0
ctest --test-dir "$build" -R "$tests" --output-on-failure --timeout 600 "$@" || status=$?

reports=$(find "$logs" -type f | sort)
if [ -n "$reports" ]; then
    echo "sanitizer reports from servers started by the tests:" >&2
    for report in $reports; do
        echo "---- $report" >&2
        cat "$report" >&2
    done
    status=1
fi
exit "$status"
