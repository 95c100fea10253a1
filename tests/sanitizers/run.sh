#!/usr/bin/env bash
# Builds berth and its tests with AddressSanitizer + UndefinedBehaviorSanitizer
# (gcc, Debug, -DBERTH_SANITIZE=ON) in build-asan, and runs a chosen subset of the
# tests against that build: the unit tests, the conformance suite, and the
# integration and fault tests that feed berth hostile input (requests, uploads,
# tokens, carriers, upstream answers, crash points). A Debug ASan server is 2-6
# times slower, so the whole set (about 25 minutes more) is opt-in:
#   SANITIZE_TESTS='unit|integration|conformance|fault' tests/sanitizers/run.sh
# Fails on a test failure or on any sanitizer report, including one from a
# server that a test started (those go to build-asan/sanitizer-logs, see
# tests/CMakeLists.txt).
#
#   tests/sanitizers/run.sh [extra ctest arguments...]
#   SANITIZE_BUILD_DIR=... (default <repo>/build-asan), SANITIZE_JOBS=2,
#   SANITIZE_TESTS=... (the ctest -R regex), SANITIZE_BUILD_ONLY=1 (build, run nothing)
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
build="${SANITIZE_BUILD_DIR:-$repo/build-asan}"
jobs="${SANITIZE_JOBS:-2}"
subset='unit|conformance|fault\.test_(crash|upload_crash_points)'
subset+='|integration\.test_(hardening_(agent_forwarding|intake|restructure|identities|ui_paging)'
subset+='|hostile_upstream_(manifests|tags|redirects)|limits_hardening|early_answers|uploads|blob_reads|descriptors|auth|notifications)'
tests="${SANITIZE_TESTS:-^($subset)\$}"

cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DBERTH_LINE_TABLES_ONLY=ON -DBERTH_SANITIZE=ON >/dev/null
# Only what the tests run: berth, the unit tests and the conformance suite beside berth.
cmake --build "$build" -j"$jobs" --target berth berth_unit_tests berth-conformance
[ "${SANITIZE_BUILD_ONLY:-0}" = 1 ] && exit 0

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
