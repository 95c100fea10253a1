#!/usr/bin/env bash
# Runs conformance/run against a fresh berth (BERTH_BIN) on a free loopback port.
set -euo pipefail
. "$(dirname "$0")/registry.sh"
start_registry
python3 "$(dirname "$0")/../../conformance/run" "$REGISTRY_URL"
