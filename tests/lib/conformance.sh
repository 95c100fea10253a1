#!/usr/bin/env bash
# Runs the conformance suite the build packs beside berth (<build>/conformance/berth-conformance.pyz,
# next to BERTH_BIN=<build>/berth; BERTH_CONFORMANCE=path overrides) against a fresh berth on a free
# loopback port, then the opt-in sparse data set against one that accepts sparse manifests.
set -euo pipefail
. "$(dirname "$0")/registry.sh"
suite=${BERTH_CONFORMANCE:-}
if [[ -z $suite ]]; then
    [[ -n ${BERTH_BIN:-} ]] || fail "neither BERTH_CONFORMANCE nor BERTH_BIN (the berth binary the suite is built beside) is set"
    bin=$BERTH_BIN
    [[ $bin == */* ]] || bin=$(command -v "$bin") || fail "BERTH_BIN: '$BERTH_BIN' not found in PATH"
    suite=$(dirname "$(realpath "$bin")")/conformance/berth-conformance.pyz
fi
[[ -f $suite ]] || fail "$suite is missing: build it (cmake --build <build>, target berth-conformance)" \
    "or set BERTH_CONFORMANCE"
start_registry
python3 "$suite" "$REGISTRY_URL"
stop_pid "$REGISTRY_PID" registry
make_tmpdir sparse_dir
echo '{"sparse_manifests": ["**"]}' >"$sparse_dir/config.json"
BERTH_CONFIG=$sparse_dir/config.json start_registry
python3 "$suite" "$REGISTRY_URL" --sparse
