#!/usr/bin/env bash
# Validates berth's Kubernetes manifests offline (see validate.mjs): every
# YAML file under DIR, recursively (k8s/node/ included), what the patches of
# k8s/bucket/ make of the base (kustomize.mjs), and container runtime files
# under DIR (check-config.sh validates those the agent writes) against the
# agent's ConfigMap:
#   bash k8s/validate/run.sh [DIR]     DIR defaults to k8s/
# Installs the pinned tools from package-lock.json with `npm ci` the first
# time (needs the npm registry); later runs reuse node_modules and need no
# network. Needs Node 18 or newer.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "k8s/validate: node and npm are needed (Debian: apt-get install nodejs npm)" >&2
    exit 2
fi
# Reinstall only when node_modules is missing or older than the lock file.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    npm ci --no-audit --no-fund --loglevel=error >&2
fi
exec node validate.mjs "$@"
