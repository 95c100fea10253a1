#!/usr/bin/env bash
# Smoke test of the benchmark tooling: a tiny bench/compare run (well under a
# minute) of a few workloads. Runs against berth and Distribution when
# docker-registry is installed, otherwise against berth only. Fails when a run
# fails or any request errs.
# Usage: bench/smoke.sh [BERTH_BINARY [BERTH_BENCH_BINARY]]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
berth="${1:-$here/../build/berth}"
bench="${2:-$here/../build/bench/berth-bench}"
servers=berth
if command -v docker-registry >/dev/null 2>&1; then servers=berth,distribution; fi
exec "$here/compare" --quick --servers "$servers" --berth "$berth" --bench "$bench" \
    --workloads push-monolithic-1m-c8,push-chunked-10m-c1,pull-1m-c8,manifest-head-c8,tags-list-c8
