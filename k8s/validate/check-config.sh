#!/usr/bin/env bash
# Starts berth with the configuration from k8s/configmap.yaml to prove berth
# accepts it (its config check is strict: an unknown key or a wrong type stops
# the start). Only the secret paths are changed, to a throwaway secret, and
# the data and backups go to a temporary directory; the backup CronJob's
# command must then get a backup. berth serves on a free loopback port
# until /healthz answers, then gets SIGTERM and must exit 0.
#   bash k8s/validate/check-config.sh [BERTH_BINARY]   (default build/berth)
# Needs node_modules here (bash k8s/validate/run.sh installs it), curl and python3.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
berth="${1:-$repo/build/berth}"
[ -x "$berth" ] || { echo "check-config: no berth binary at $berth (build it first)" >&2; exit 2; }
[ -d "$here/node_modules" ] || (cd "$here" && npm ci --no-audit --no-fund --loglevel=error >&2)

work="$(mktemp -d)"
pid=""
cleanup() {
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$work/peer-secret"
node "$here/extract-config.mjs" "$repo/k8s/configmap.yaml" "$work/peer-secret" > "$work/config.json"
# a port outside the ephemeral range, as the integration tests pick theirs
port="$(PYTHONPATH="$repo/tests/lib" python3 -c 'import berthtest; print(berthtest.free_port())')"

"$berth" serve --config "$work/config.json" --listen "127.0.0.1:$port" --root "$work/data" \
    > "$work/berth.log" 2>&1 &
pid=$!

healthy=""
for _ in $(seq 1 100); do
    if curl -fsS -o /dev/null "http://127.0.0.1:$port/healthz" 2>/dev/null; then healthy=yes; break; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
if [ -z "$healthy" ]; then
    echo "FAIL: berth did not serve /healthz with the ConfigMap's configuration:" >&2
    cat "$work/berth.log" >&2
    exit 1
fi
readyz="$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz" || true)"
# The backup CronJob's command against this configuration: a backup lands in backup.target.
if ! "$berth" backup --url "http://127.0.0.1:$port" --secret-file "$work/peer-secret" > "$work/backup.json" 2>&1 ||
    [ -z "$(ls "$work/backups/backups" 2>/dev/null)" ]; then
    echo "FAIL: berth backup --url with the ConfigMap's backup section:" >&2
    cat "$work/backup.json" "$work/berth.log" >&2
    exit 1
fi

kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid=""
if [ "$status" -ne 0 ]; then
    echo "FAIL: berth exited $status on SIGTERM:" >&2
    cat "$work/berth.log" >&2
    exit 1
fi
echo "ok: berth accepted k8s/configmap.yaml's configuration (/healthz 200, /readyz $readyz, a backup on request, exit 0 on SIGTERM)"
