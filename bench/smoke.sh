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
# Two samples as `perf script` prints them: the first from libcrypto (no symbols), the second
# from the kernel under berth; each folds root first, libcrypto's frames named by library.
folded=$(printf '%s\n' \
    'berth 1 1.0: 1001001 cpu-clock: ' \
    '	  241f43 CRYPTO_ctr128_encrypt_ctr32+0x13 (/usr/lib/x86_64-linux-gnu/libcrypto.so.3)' \
    '	  241e00 [unknown] (/usr/lib/x86_64-linux-gnu/libcrypto.so.3)' \
    '	  1a7504 berth::storage::UploadAppender::submit+0x4 (/work/build/berth)' \
    '' \
    'berth 1 1.1: 1001001 cpu-clock: ' \
    '	ffffffff8123 _copy_to_iter+0x12 ([kernel.kallsyms])' \
    '	    7f12 __libc_recvmsg+0x5 (/usr/lib/x86_64-linux-gnu/libc.so.6)' \
    '' | "$here/flamegraph" --folded /dev/stdout)
expected=$'__libc_recvmsg;_copy_to_iter 1\nberth::storage::UploadAppender::submit;[libcrypto.so.3] 1'
if [ "$folded" != "$expected" ]; then
    echo "flamegraph folded:"$'\n'"$folded"$'\n'"expected:"$'\n'"$expected" >&2
    exit 1
fi
exec "$here/compare" --quick --servers "$servers" --berth "$berth" --bench "$bench" \
    --workloads push-monolithic-1m-c8,push-chunked-10m-c1,pull-1m-c8,manifest-head-c8,tags-list-c8
