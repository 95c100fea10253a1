#!/usr/bin/env bash
# Runs conformance/run against a fresh berth (BERTH_BIN) on a free loopback port,
# then the opt-in sparse data set against one that accepts sparse manifests.
set -euo pipefail
. "$(dirname "$0")/registry.sh"
start_registry
python3 "$(dirname "$0")/../../conformance/run" "$REGISTRY_URL"
stop_pid "$REGISTRY_PID" registry
make_tmpdir sparse_dir
echo '{"sparse_manifests": ["**"]}' >"$sparse_dir/config.json"
BERTH_CONFIG=$sparse_dir/config.json start_registry
python3 "$(dirname "$0")/../../conformance/run" "$REGISTRY_URL" --sparse
