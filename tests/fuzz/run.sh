#!/usr/bin/env bash
# Builds the libFuzzer harnesses with clang-14 in build-fuzz and runs each for a
# bounded time on a scratch copy of its seed corpus (tests/fuzz/corpus/<name>
# stays as committed). Fails on the first target that crashes, leaks, trips a
# sanitizer or an invariant, printing the input that did it.
#
#   tests/fuzz/run.sh [SECONDS_PER_TARGET]     (default 60)
#   FUZZ_TARGETS="fuzz_names fuzz_ranges" tests/fuzz/run.sh 30
#   FUZZ_JOBS=2 (build parallelism), FUZZ_PARALLEL=$(nproc) (targets run at once),
#   FUZZ_BUILD_DIR=... (default <repo>/build-fuzz), FUZZ_BUILD_ONLY=1 (build, run nothing)
#   FUZZ_SEED=1: a fixed seed, so a run explores the same inputs each time and
#   a CI failure is reproducible; FUZZ_SEED=0 lets libFuzzer pick one.
#
# Needs clang-14 and libfuzzer-14-dev (.ci/install-deps test installs them).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
seconds="${1:-60}"
build="${FUZZ_BUILD_DIR:-$repo/build-fuzz}"
jobs="${FUZZ_JOBS:-2}"
parallel="${FUZZ_PARALLEL:-$(nproc)}"
((parallel >= 1)) || parallel=1
targets=(${FUZZ_TARGETS:-fuzz_names fuzz_manifest fuzz_ranges fuzz_request fuzz_upstream_answers fuzz_tokens fuzz_carriers fuzz_paths})

CC="${CC_FUZZ:-clang-14}" CXX="${CXX_FUZZ:-clang++-14}" \
    cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBERTH_LINE_TABLES_ONLY=ON \
    -DBERTH_FUZZ=ON -DBUILD_TESTING=OFF \
    >"$build.configure.log" 2>&1 || { cat "$build.configure.log" >&2; exit 1; }
rm -f "$build.configure.log"
cmake --build "$build" -j"$jobs" --target "${targets[@]}"
[ "${FUZZ_BUILD_ONLY:-0}" = 1 ] && exit 0

work="$(mktemp -d "${TMPDIR:-/tmp}/berth-fuzz.XXXXXX")"
trap 'rm -rf "$work"' EXIT
artifacts="$build/artifacts"
mkdir -p "$artifacts"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# Each target runs for its seconds on one core; $parallel of them at a time (libFuzzer is
# single-threaded), so the stage takes seconds x targets / parallel.
run_target() {
    local target="$1" corpus="$work/$1" log="$build/$1.log" status=0
    "$build/tests/fuzz/$target" "$corpus" -seed="${FUZZ_SEED:-1}" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
        -max_len=65536 -print_final_stats=1 -artifact_prefix="$artifacts/$target-" >"$log" 2>&1 || status=$?
    echo "$status" >"$work/$target.status"
}

report() {
    local target="$1" log="$build/$1.log" status
    status=$(cat "$work/$target.status")
    echo "== $target: ${seconds}s, $(cat "$work/$target.seeds") seeds" >&2
    grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb)|^#[0-9]+ +DONE' "$log" | sed 's/^/   /' >&2 || true
    if [ "$status" -ne 0 ]; then
        echo "!! $target failed (exit $status); log: $log" >&2
        grep -E 'ERROR: |invariant failed|runtime error|==[0-9]+==|^SUMMARY' "$log" | head -20 | sed 's/^/   /' >&2 || true
        grep -E "^(artifact_prefix|Test unit written to)" "$log" | sed 's/^/   /' >&2 || true
        for input in $(sed -n 's/.*Test unit written to //p' "$log"); do
            echo "   crashing input: $input (reproduce: $build/tests/fuzz/$target $input)" >&2
        done
        failed+=("$target")
    fi
}

failed=()
for ((i = 0; i < ${#targets[@]}; i += parallel)); do
    batch=("${targets[@]:i:parallel}")
    for target in "${batch[@]}"; do
        mkdir -p "$work/$target"
        seeds="$repo/tests/fuzz/corpus/${target#fuzz_}"
        [ -d "$seeds" ] && cp -r "$seeds/." "$work/$target/"
        ls "$work/$target" | wc -l >"$work/$target.seeds"
        run_target "$target" &
    done
    wait
    for target in "${batch[@]}"; do report "$target"; done
done

if [ ${#failed[@]} -ne 0 ]; then
    echo "fuzzing failed: ${failed[*]}" >&2
    exit 1
fi
echo "fuzzing: ${targets[*]} ran ${seconds}s each without a finding" >&2
